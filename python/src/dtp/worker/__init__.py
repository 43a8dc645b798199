"""The worker: ``python -m dtp.worker --tasks tasks.py`` (see ``python -m dtp.worker --help``).

``worker`` holds the worker and the attempts it holds, ``session`` one session
with a coordinator (``link`` one connection of it), ``lane`` a session with
what belongs to it alone (one per shard leader with a sharded coordinator:
``shard_map`` plans them, ``shard_list`` asks for the map, ``held`` lists what
a session holds when it registers again), ``attempt`` one object per attempt,
``pool`` the pool of task processes that run the handlers (``process`` one of
them, ``_child`` and ``_shared`` what runs in it, ``pipe`` the messages
between them), ``options`` the settings and their bounds, ``cli`` the command
line.
"""
