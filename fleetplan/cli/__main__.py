"""``python -m fleetplan.cli``: the same command line as ``fleetplan``."""

import sys

from fleetplan.cli import main

sys.exit(main())
