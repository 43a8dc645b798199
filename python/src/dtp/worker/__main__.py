"""``python -m dtp.worker``: runs a worker in the foreground until SIGTERM or SIGINT."""

import sys

from .cli import main

sys.exit(main())
