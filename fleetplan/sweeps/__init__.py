"""The performance model and the vectorized sweep engine.

Entry points:

- ``sweep(gpus, models, quants, ...)`` evaluates a cartesian grid into one table;
  ``iter_sweep`` streams it in chunks and ``make_grid`` resolves the axes once;
- ``estimate_cases(cases)`` evaluates one operating point per case (fixed batch, knee under
  SLOs, offline ceiling, a request rate or the largest rate meeting the SLOs);
- ``disaggregated(cases)`` sizes prefill/decode pools;
- ``load_measurements()`` reads published measurements for calibration and validation.

The formulas live one per function in ``memory``, ``latency``, ``throughput`` and ``queueing``;
``step_times`` combines them into the decode step and the prefill of one replica, and
``row_kernel`` evaluates every metric of a grid row from them.
"""

from fleetplan.sweeps.assumptions import Assumptions
from fleetplan.sweeps.columns import SWEEP_COLUMNS
from fleetplan.sweeps.disaggregation import disaggregated
from fleetplan.sweeps.estimate import estimate_cases
from fleetplan.sweeps.measurements import load_measurements
from fleetplan.sweeps.sweep_grid import iter_sweep, make_grid, sweep

__all__ = ["SWEEP_COLUMNS", "Assumptions", "disaggregated", "estimate_cases", "iter_sweep", "load_measurements",
           "make_grid", "sweep"]
