"""The worker: ``python -m dtp.worker --tasks tasks.py`` (see ``python -m dtp.worker --help``).

``dtp.worker.core`` holds the worker itself, ``dtp.worker.pool`` the pool of task
processes that run the handlers, ``dtp.worker.cli`` the command line.
"""
