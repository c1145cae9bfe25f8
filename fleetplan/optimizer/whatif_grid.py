"""What-if grids: a base scenario plus axes of changes, expanded into scenario variants, and
the result row each variant's plan gives (solved by ``whatif_solving.py``).

A grid file (YAML or TOML) names a ``base`` scenario (a path relative to the grid file, or
``example``) and either ``axes`` (their cartesian product is solved) or an explicit list of
named ``cases``. Axes:

- ``demand_multiplier``: scales every workload's demand;
- ``tpot_slo_ms``, ``ttft_slo_ms``, ``input_tokens``, ``monthly_growth``: set on every workload;
- ``price_multiplier: {gpu: [factors]}``: scales that GPU's catalog and scenario prices; a key
  ``provider:<name>`` scales every catalog price of that provider;
- ``max_gpus: {gpu: [caps]}``: availability caps;
- ``allowed_gpus: {set name: [gpu ids]}`` and ``pricing: {mix name: [pricing types]}``: named
  alternatives;
- ``disaggregation: {name: settings or null}``: named ``fleet.disaggregation`` settings (null =
  colocated replicas only), e.g. ``{colocated: null, pairs: {}}``;
- ``engine: [engine ids]``: the efficiency profile (``fleet.engine``; ``*`` = the default rows);
- ``cost_of_capital``, ``residual_value``: set on the fleet (what purchases' price is recovered
  at, and what a bought server sells for at the end of its life).

Cases that differ only in ``demand_multiplier``, per-GPU ``price_multiplier`` and ``max_gpus``
are solved as variants of one built model (``whatif_variants.py``), with the rows a full plan
would give.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleetplan.catalogs import Catalogs
from fleetplan.errors import ScenarioError, did_you_mean, field_pattern
from fleetplan.optimizer.example import example_data
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.scenario import Scenario
from fleetplan.optimizer.scenario_files import error_message, read_data
from fleetplan.optimizer.strict_model import NumbersNotBooleans

log = logging.getLogger(__name__)

SCALAR_AXES = ("demand_multiplier", "tpot_slo_ms", "ttft_slo_ms", "input_tokens", "monthly_growth")
PER_GPU_AXES = ("price_multiplier", "max_gpus")
NAMED_AXES = ("allowed_gpus", "pricing", "disaggregation")
FLEET_AXES = ("engine", "cost_of_capital", "residual_value")
#: Fleet axes that are numbers, and the base scenario's own value on them.
FLEET_NUMBER_AXES = ("cost_of_capital", "residual_value")
_DEMAND_FIELDS = ("requests_per_s", "tokens_per_s", "tokens_per_month")


_Floats = Annotated[list[float], Field(min_length=1)]
_Whole = Annotated[list[int], Field(min_length=1)]
_Names = Annotated[list[str], Field(min_length=1)]


class Axes(NumbersNotBooleans):
    # inf/nan survive the JSON trip to worker processes: each case is checked on its own there
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    demand_multiplier: list[float] | None = Field(None, min_length=1)
    tpot_slo_ms: list[float] | None = Field(None, min_length=1)
    ttft_slo_ms: list[float] | None = Field(None, min_length=1)
    input_tokens: list[int] | None = Field(None, min_length=1)
    monthly_growth: list[float] | None = Field(None, min_length=1)
    # an empty axis or set would make the grid's product empty: no case at all
    price_multiplier: dict[str, _Floats] | None = Field(None, min_length=1)
    max_gpus: dict[str, _Whole] | None = Field(None, min_length=1)
    allowed_gpus: dict[str, _Names] | None = Field(None, min_length=1)
    pricing: dict[str, _Names] | None = Field(None, min_length=1)
    disaggregation: dict[str, dict[str, Any] | None] | None = Field(None, min_length=1)
    engine: list[str] | None = Field(None, min_length=1)
    cost_of_capital: list[float] | None = Field(None, min_length=1)
    residual_value: list[float] | None = Field(None, min_length=1)


class Grid(BaseModel):
    """A what-if grid file."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    base: str = Field(description="Base scenario: a path relative to the grid file, or 'example'")
    axes: Axes | None = None
    cases: list[dict[str, Any]] | None = Field(None, min_length=1, description="Named cases instead of axes")


#: The start of an error message about a grid file's field (``axes.max_gpus: ...``).
GRID_FIELD = field_pattern(Grid.model_fields)


def load_grid(path: str | Path) -> tuple[Grid, dict]:
    """The validated grid and its base scenario as a plain mapping."""
    path = Path(path)
    data = read_data(path)
    try:
        grid = Grid.model_validate(data)
    except ValidationError as error:
        message = f"{path.name}: {error_message(error.errors()[0], Grid)}"
        raise ScenarioError(message) from None
    if (grid.axes is None) == (grid.cases is None):
        message = f"{path.name}: give either axes or cases"
        raise ScenarioError(message)
    return grid, _base_data(grid.base, path.parent)


def check_gpu_ids(grid: Grid, gpu_ids) -> None:
    """GPU ids named by the axes (per-GPU keys, allowed sets) must be catalog ids."""
    axes = grid.axes
    if axes is None:
        return
    named = [(f"axes.{name}", key) for name in PER_GPU_AXES for key in (getattr(axes, name) or {})
             if not key.startswith("provider:")]
    named += [(f"axes.allowed_gpus.{name}", gpu) for name, gpus in (axes.allowed_gpus or {}).items() for gpu in gpus]
    known = set(gpu_ids)
    for where, gpu in named:
        if gpu.strip().lower() not in known:
            message = f"{where}: {did_you_mean(gpu, known, kind='gpu')}"
            raise ScenarioError(message)


def check_capped_gpus(grid: Grid, base: dict) -> None:
    """GPUs the ``max_gpus`` axis caps must be in the base scenario's fleet or in a set of the
    ``allowed_gpus`` axis: otherwise every case would fail the same way."""
    axes = grid.axes
    if axes is None or not axes.max_gpus:
        return
    entries = (base.get("fleet") or {}).get("gpus") or []
    fleet = {_entry_id(e) for e in entries}
    allowed = {g.lower() for gpus in (axes.allowed_gpus or {}).values() for g in gpus}
    for gpu in axes.max_gpus:
        if gpu.lower() not in fleet | allowed:
            message = (f"axes.max_gpus.{gpu}: the base scenario's fleet.gpus has no {gpu} (it "
                       f"has {', '.join(sorted(fleet))}); add it there or to an allowed_gpus set")
            raise ScenarioError(message)


def _base_data(base: str, folder: Path) -> dict:
    if base == "example":
        return example_data()
    path = Path(base) if Path(base).is_absolute() else folder / base
    if not path.is_file():
        message = f"base scenario {path} does not exist"
        raise ScenarioError(message)
    return read_data(path)


def expand(grid: Grid) -> list[dict[str, Any]]:
    """The grid's cases: one mapping of axis column -> value per scenario variant."""
    if grid.cases is not None:
        return [dict(case) for case in grid.cases]
    columns: list[tuple[str, list]] = []
    axes = grid.axes.model_dump(exclude_none=True)
    for name in SCALAR_AXES:
        if name in axes:
            columns.append((name, axes[name]))
    for name in PER_GPU_AXES:
        for gpu, values in axes.get(name, {}).items():
            columns.append((f"{name}[{gpu}]", values))
    for name in NAMED_AXES:
        if name in axes:
            columns.append((name, list(axes[name])))
    for name in FLEET_AXES:
        if name in axes:
            columns.append((name, axes[name]))
    names = [name for name, _ in columns]
    return [dict(zip(names, values)) for values in itertools.product(*(v for _, v in columns))]


def base_axis_values(scenario: Scenario, columns: list[str]) -> dict[str, float]:
    """The base scenario's own value on each axis column that has one, so that the base case of
    a grid of named cases can stand on that axis: 1 for ``demand_multiplier`` and a
    ``price_multiplier[gpu]``, a GPU's ``max_gpus`` cap where the base sets one, and a workload
    input every workload shares (``input_tokens`` only when no workload has a histogram; an
    SLO only when every workload has one)."""
    caps = {option.id.lower(): option.max_gpus for option in scenario.fleet.gpus}
    workloads = scenario.workloads
    values: dict[str, float] = {}
    for column in columns:
        if column == "demand_multiplier" or column.startswith("price_multiplier["):
            values[column] = 1.0
        elif column.startswith("max_gpus["):
            cap = caps.get(column[len("max_gpus["):-1].lower())
            if cap is not None:
                values[column] = float(cap)
        elif column in FLEET_NUMBER_AXES:
            values[column] = float(getattr(scenario.fleet, column))
        elif column in SCALAR_AXES:
            shared = {getattr(workload, column) for workload in workloads}
            if len(shared) == 1 and None not in shared:
                values[column] = float(shared.pop())
    return values


def case_id(case: dict) -> str:
    """A stable id of a case's values (resume key)."""
    text = json.dumps(case, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def apply_case(base: dict, case: dict, grid: Grid) -> tuple[dict, dict[str, float]]:
    """The scenario mapping for ``case`` and the price multipliers per GPU it implies."""
    scenario = copy.deepcopy(base)
    named = grid.axes.model_dump(exclude_none=True) if grid.axes is not None else {}
    multipliers: dict[str, float] = {}
    for column, value in case.items():
        if column == "name":
            scenario["name"] = f"{scenario.get('name', 'scenario')}:{value}"
        elif column in SCALAR_AXES:
            _set_on_workloads(scenario, column, value)
        elif column.startswith("price_multiplier["):
            multipliers[column[len("price_multiplier["):-1].lower()] = float(value)
        elif column.startswith("max_gpus["):
            _gpu_entry(scenario, column[len("max_gpus["):-1])["max_gpus"] = int(value)
        elif column == "allowed_gpus":
            _allow(scenario, named.get("allowed_gpus", {}).get(value, value))
        elif column == "pricing":
            scenario["fleet"]["pricing"] = named.get("pricing", {}).get(value, value)
        elif column == "disaggregation":
            scenario["fleet"]["disaggregation"] = named.get("disaggregation", {}).get(value, value)
        elif column == "engine":
            scenario["fleet"]["engine"] = None if value in ("*", None) else value
        elif column in FLEET_NUMBER_AXES:
            scenario["fleet"][column] = value
        else:
            axes = ", ".join(SCALAR_AXES + PER_GPU_AXES + NAMED_AXES + FLEET_AXES)
            message = f"unknown what-if axis '{column}' (axes: {axes})"
            raise ScenarioError(message)
    _scale_own_prices(scenario, multipliers)
    return scenario, multipliers


def _set_on_workloads(scenario: dict, column: str, value) -> None:
    for workload in scenario["workloads"]:
        if column == "demand_multiplier":
            for field in _DEMAND_FIELDS:
                if workload.get(field) is not None:
                    workload[field] = workload[field] * float(value)
        elif column == "input_tokens" and workload.get("histogram"):
            continue  # a histogram keeps its own sizes
        else:
            workload[column] = value


def _gpu_entry(scenario: dict, gpu: str) -> dict:
    entries = scenario["fleet"]["gpus"]
    for index, entry in enumerate(entries):
        entry = {"id": entry} if isinstance(entry, str) else entry
        entries[index] = entry
        if entry["id"].lower() == gpu.lower():
            return entry
    message = f"what-if axis names gpu '{gpu}', which the base scenario's fleet does not allow"
    raise ScenarioError(message)


def _entry_id(entry: str | dict) -> str:
    """The GPU id of a ``fleet.gpus`` entry (an id, or a mapping with one), lower-cased."""
    return str(entry if isinstance(entry, str) else entry.get("id", "")).lower()


def _allow(scenario: dict, gpus: list[str]) -> None:
    existing = {_entry_id(e): e for e in scenario["fleet"]["gpus"]}
    scenario["fleet"]["gpus"] = [existing.get(g.lower(), g) for g in gpus]


def _scale_own_prices(scenario: dict, multipliers: dict[str, float]) -> None:
    for entry in scenario["fleet"]["gpus"]:
        if isinstance(entry, dict) and entry.get("usd_per_gpu_hour") and entry["id"].lower() in multipliers:
            factor = multipliers[entry["id"].lower()]
            entry["usd_per_gpu_hour"] = {k: v * factor for k, v in entry["usd_per_gpu_hour"].items()}


def scaled_catalogs(catalogs: Catalogs, multipliers: dict[str, float]) -> Catalogs:
    """Catalogs whose price rows of the named GPUs (or ``provider:<name>``) are multiplied."""
    if not multipliers:
        return catalogs
    prices = catalogs.prices.copy()
    for key, factor in multipliers.items():
        if key.startswith("provider:"):
            rows = prices["provider"].str.lower() == key[len("provider:"):]
        else:
            rows = prices["gpu"] == key
        prices.loc[rows, "usd_per_gpu_hour"] = prices.loc[rows, "usd_per_gpu_hour"] * factor
    return replace(catalogs, prices=prices)


#: The columns of every result row (:func:`summary_row`), besides the case's inputs.
RESULT_COLUMNS = ("status", "gap", "usd_per_month", "usd_per_year", "usd_per_m_tokens",
                  "gpus_peak", "served_fraction_min", "solve_seconds", "message")


def summarize(case: dict, plan: FleetPlan) -> dict:
    """One result row: the case's inputs and the plan's headline outputs."""
    workloads = plan.workloads
    return summary_row(
        case, status=plan.status, gap=plan.gap, usd_per_month=plan.usd_per_month,
        tokens_per_month=workloads["tokens_per_month"] if len(workloads) else None,
        served_fraction=workloads["served_fraction"] if len(workloads) else None,
        gpus_peak=plan.costs_by_gpu.set_index("gpu")["gpus_peak"],
        solve_seconds=plan.solve_seconds, message=_first_reason(plan))


def summary_row(case: dict, *, status: str, gap: float, usd_per_month: float,
                tokens_per_month: pd.Series | None, served_fraction: pd.Series | None,
                gpus_peak: pd.Series, solve_seconds: float, message: str) -> dict:
    """A result row from a plan's figures: tokens and served fraction per workload, peak GPUs
    per GPU type [GPUs]; usd_per_m_tokens and the totals follow from them."""
    tokens = float(tokens_per_month.sum()) if tokens_per_month is not None else np.nan
    row = {**case, "status": status, "gap": gap, "usd_per_month": usd_per_month,
           "usd_per_year": usd_per_month * 12.0,
           "usd_per_m_tokens": usd_per_month / tokens * 1e6 if tokens else np.nan,
           # whole GPUs summed from solver values: the float noise is dropped, not the value
           "gpus_peak": round(float(gpus_peak.sum()), 6) if len(gpus_peak) else 0.0,
           "served_fraction_min": float(served_fraction.min())
           if served_fraction is not None else np.nan,
           "solve_seconds": solve_seconds, "message": message}
    for gpu, peak in gpus_peak.items():
        row[f"gpus_{gpu}"] = round(float(peak), 6)
    return row


def _first_reason(plan: FleetPlan) -> str:
    if len(plan.unmet_demand):
        return str(plan.unmet_demand["reason"].iloc[0])
    return ""
