"""The worker: ``python -m dtp.worker --tasks tasks.py`` (see ``python -m dtp.worker --help``).

``session`` holds the worker's session with its coordinator, ``attempt`` one
object per attempt it holds, ``pool`` the pool of task processes that run the
handlers (``process`` one of them, ``_child`` and ``_shared`` what runs in
it, ``pipe`` the messages between them), ``options`` the settings and their
bounds, ``cli`` the command line.
"""
