"""The performance model and the vectorized sweep engine.

``sweep`` evaluates a cartesian grid; ``iter_sweep`` streams it in chunks; ``estimate_cases``
evaluates one operating point per case (fixed batch, knee under SLOs, or offline ceiling).
The formulas live one per function in ``memory``, ``latency`` and ``throughput``.
"""

from fleetplan.sweeps.assumptions import Assumptions
from fleetplan.sweeps.columns import SWEEP_COLUMNS
from fleetplan.sweeps.engine import iter_sweep, make_grid, sweep
from fleetplan.sweeps.estimate import estimate_cases

__all__ = ["SWEEP_COLUMNS", "Assumptions", "estimate_cases", "iter_sweep", "make_grid", "sweep"]
