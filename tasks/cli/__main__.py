"""``python -m elmo_tasks.cli``: the ``elmo-tasks`` command."""
import sys

from elmo_tasks.cli import main

sys.exit(main())
