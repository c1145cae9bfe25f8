"""``python -m fleetplan.cli``: the same command line as ``fleetplan``."""

import sys

from fleetplan.cli import main

if __name__ == "__main__":  # what-if worker processes import this module without running it
    sys.exit(main())
