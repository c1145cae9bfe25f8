"""A FleetPlan as JSON (one file) or as a folder of CSV tables, and back from JSON.

Both go through the one atomic writer (``fleetplan.exports.atomic``): a failed write leaves no
partial file, and files get the permissions the umask gives.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fleetplan.exports.atomic import atomic_dir, write_text_atomic
from fleetplan.optimizer.fleet_plan import FleetPlan


def plan_json_text(plan: FleetPlan) -> str:
    """The whole plan as JSON text (tables as lists of records), newline-terminated."""
    return json.dumps(plan.to_dict(), indent=1, allow_nan=False) + "\n"


def write_plan_json(plan: FleetPlan, path: str | os.PathLike) -> Path:
    """Write the plan as one JSON file, atomically; returns the path."""
    return write_text_atomic(path, plan_json_text(plan))


def write_plan_csv(plan: FleetPlan, folder: str | os.PathLike) -> Path:
    """Write one CSV per non-empty table plus ``plan.json`` (scalars) as the folder ``folder``,
    which replaces any earlier one as a whole; returns the folder."""
    with atomic_dir(folder) as temporary:
        for name, table in plan.tables().items():
            if not table.empty:
                write_text_atomic(temporary / f"{name}.csv", table.to_csv(index=False))
        scalars = json.dumps(plan.scalars(), indent=1, allow_nan=False)
        write_text_atomic(temporary / "plan.json", scalars + "\n")
    return Path(folder)


def read_plan_json(path: str | os.PathLike) -> FleetPlan:
    """Read a plan written by :func:`write_plan_json` (tables come back as DataFrames)."""
    return FleetPlan.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
