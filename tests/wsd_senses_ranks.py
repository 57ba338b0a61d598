"""`python -m tests.wsd_senses_ranks ARGS`: ``elmo-tasks ARGS`` with glosses embedded 2 at a time, so that a tiny
WordNet's glosses make several chunks for the torchrun ranks to share (tests/test_wsd_senses_build.py)."""
import sys

from elmo_tasks.cli import main
from elmo_tasks.wsd import senses

if __name__ == "__main__":
    senses.GLOSS_CHUNK = 2
    sys.exit(main())
