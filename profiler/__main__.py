"""``python -m profiler``: the ``rlprof`` command line, for environments without the console script."""

import sys

from profiler.cli import main

sys.exit(main())
