"""`python -m tests.wsd_senses_ranks ARGS`: ``elmo-tasks ARGS`` with glosses embedded 2 at a time, so that a tiny
WordNet's glosses make several chunks for the torchrun ranks to share (tests/test_wsd_senses_build.py); with
LEAN_GLOSSES=1, the choices embed only the held-out candidates' glosses whenever they are fewer than the senses
(``sense_build.lean_glosses``), as they do for all of WordNet."""
import os
import sys

from elmo_tasks.cli import main
from elmo_tasks.wsd import sense_build, senses

if __name__ == "__main__":
    senses.GLOSS_CHUNK = 2
    if os.environ.get("LEAN_GLOSSES") == "1":
        sense_build.lean_glosses = lambda candidates, texts, n: candidates < n
    sys.exit(main())
