"""``python -m tasks.cli``: the ``elmo-tasks`` command."""
import sys

from tasks.cli import main

sys.exit(main())
