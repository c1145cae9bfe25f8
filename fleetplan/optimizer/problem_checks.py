"""Bounds on a problem's tables, checked before a model is built from them.

The solver is handed only finite numbers of sane magnitude: an infinite or 1e30 demand, a
capacity of 1e-300 requests/s or a price of 1e300 would make HiGHS or CBC fail deep inside (or
return an empty fleet as "optimal"). A table built by ``fleetplan.optimizer.scenario_planning``
always passes; these checks guard problems built by hand (``table_problem`` and the like).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fleetplan.errors import InvalidValueError, shown

#: Least capacity a replica may have [requests/s] (3.6 requests an hour); below, 0 (unusable).
MIN_REQ_S_PER_REPLICA = 1e-3
#: (table, column): (lowest, highest, zero allowed, missing allowed). Capacity and price bounds
#: are those of capacity profiles and of the prices catalog.
BOUNDS = {
    ("candidates", "req_s_per_replica"): (MIN_REQ_S_PER_REPLICA, 1e6, True, False),
    ("demand", "req_s"): (-np.inf, 1e7, True, False),
    ("offers", "usd_per_gpu_hour"): (0.0, 1000.0, True, False),
    ("offers", "max_gpus"): (0.0, 1e6, True, True),
    ("gpus", "max_gpus"): (0.0, 1e6, True, True),
}
_NAMES = {"req_s_per_replica": "capacity", "req_s": "demand", "usd_per_gpu_hour": "price", "max_gpus": "cap"}


def check_problem(problem) -> None:
    """Raise ``InvalidValueError`` naming the table, column, row and allowed range of the first
    number out of bounds."""
    for (table, column), bounds in BOUNDS.items():
        frame = getattr(problem, table)
        if column in frame:
            _check_column(frame[column], f"{table}.{column}", *bounds)


def _check_column(values: pd.Series, field: str, low: float, high: float, zero: bool, missing: bool) -> None:
    numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    finite = np.isfinite(numbers)
    bad = ~finite & ~(missing & np.isnan(numbers))
    bad |= finite & ((numbers > high) | ((numbers < low) & ~(zero & (numbers == 0))))
    if not bad.any():
        return
    row = int(np.flatnonzero(bad)[0])
    allowed = f"a finite number <= {high:g}" if low == -np.inf else f"a finite number from {low:g} to {high:g}"
    if zero and low > 0:
        allowed = f"0 or {allowed}"
    name = _NAMES.get(field.split(".")[-1], field)
    message = f"{name} ({field}) row {row}: must be {allowed}, got {shown(values.iloc[row])}"
    raise InvalidValueError(message)
