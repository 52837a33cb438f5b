"""``python -m profiler``: the ``rlprof`` command line, for environments without the console script."""

import sys

from profiler.cli.commands import main

sys.exit(main())
