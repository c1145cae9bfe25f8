"""What-if grids: a base scenario plus axes of changes, expanded into scenario variants and
solved case by case, in parallel, resumably.

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
- ``engine: [engine ids]``: the efficiency profile (``fleet.engine``; ``*`` = the default rows).

Each case is solved by ``solve_case`` in a worker process (or a Dask task); its result row goes
to a cache the caller passes in as soon as it is known, so a rerun skips the cases already
solved (``fleetplan.exports.whatif_cache`` keeps them as JSON files). A case that fails or is
infeasible is reported in its row and never stops the grid.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import json
import logging
import multiprocessing
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fleetplan.catalogs import Catalogs, load_catalogs
from fleetplan.errors import ScenarioError, did_you_mean
from fleetplan.optimizer.example import example_data
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.scenario_files import error_message, read_data, validate_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario
from fleetplan.sweeps import estimate_cases

log = logging.getLogger(__name__)

#: How worker processes start (``multiprocessing`` start method).
WORKER_START = "forkserver"

SCALAR_AXES = ("demand_multiplier", "tpot_slo_ms", "ttft_slo_ms", "input_tokens", "monthly_growth")
PER_GPU_AXES = ("price_multiplier", "max_gpus")
NAMED_AXES = ("allowed_gpus", "pricing", "disaggregation")
FLEET_AXES = ("engine",)
_DEMAND_FIELDS = ("requests_per_s", "tokens_per_s", "tokens_per_month")


class Axes(BaseModel):
    # inf/nan survive the JSON trip to worker processes: each case is checked on its own there
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    demand_multiplier: list[float] | None = Field(None, min_length=1)
    tpot_slo_ms: list[float] | None = Field(None, min_length=1)
    ttft_slo_ms: list[float] | None = Field(None, min_length=1)
    input_tokens: list[int] | None = Field(None, min_length=1)
    monthly_growth: list[float] | None = Field(None, min_length=1)
    price_multiplier: dict[str, list[float]] | None = None
    max_gpus: dict[str, list[int]] | None = None
    allowed_gpus: dict[str, list[str]] | None = None
    pricing: dict[str, list[str]] | None = None
    disaggregation: dict[str, dict[str, Any] | None] | None = None
    engine: list[str] | None = Field(None, min_length=1)


class Grid(BaseModel):
    """A what-if grid file."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    base: str = Field(description="Base scenario: a path relative to the grid file, or 'example'")
    axes: Axes | None = None
    cases: list[dict[str, Any]] | None = Field(None, min_length=1, description="Named cases instead of axes")


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


def _allow(scenario: dict, gpus: list[str]) -> None:
    existing = {(e if isinstance(e, str) else e["id"]).lower(): e for e in scenario["fleet"]["gpus"]}
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


def summarize(case: dict, plan: FleetPlan) -> dict:
    """One result row: the case's inputs and the plan's headline outputs."""
    workloads = plan.workloads
    tokens = float(workloads["tokens_per_month"].sum()) if len(workloads) else np.nan
    row = {**case, "status": plan.status, "gap": plan.gap, "usd_per_month": plan.usd_per_month,
           "usd_per_year": plan.usd_per_month * 12.0,
           "usd_per_m_tokens": plan.usd_per_month / tokens * 1e6 if tokens else np.nan,
           "gpus_peak": float(plan.costs_by_gpu["gpus_peak"].sum()) if len(plan.costs_by_gpu) else 0.0,
           "served_fraction_min": float(workloads["served_fraction"].min()) if len(workloads) else np.nan,
           "solve_seconds": plan.solve_seconds, "message": _first_reason(plan)}
    for gpu, peak in zip(plan.costs_by_gpu["gpu"], plan.costs_by_gpu["gpus_peak"]):
        row[f"gpus_{gpu}"] = float(peak)
    return row


def _first_reason(plan: FleetPlan) -> str:
    if len(plan.unmet_demand):
        return str(plan.unmet_demand["reason"].iloc[0])
    return ""


def _grid_catalogs(catalog_paths: tuple[str, ...]) -> Catalogs:
    """The catalogs every case of a grid starts from, read once per worker process while the
    files stay as they are (an edited file, with a new size or modification time, is read
    again)."""
    return _catalogs_of(catalog_paths, tuple(_file_state(path) for path in catalog_paths))


def _file_state(path: str) -> tuple[int, int, int]:
    try:
        stat = Path(path).stat()
    except OSError:  # load_catalogs reports a missing file
        return (0, 0, 0)
    return (stat.st_ino, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _catalogs_of(catalog_paths: tuple[str, ...], states: tuple) -> Catalogs:
    return load_catalogs(list(catalog_paths))


class EstimateMemo:
    """Candidate capacities already estimated in this process, re-used by the cases that ask
    the engine the same question.

    Most axes (demand, prices, caps, pricing) leave every candidate's capacity unchanged, so a
    grid needs one engine call per distinct set of cases, not one per case. The key is the
    cases table's content, the capacity quantile and the identity of the catalogs' non-price
    tables (price rows do not enter a capacity; ``scaled_catalogs`` replaces only those).
    """

    def __init__(self, size: int = 64):
        self.size = size
        self.results: OrderedDict[tuple, pd.DataFrame] = OrderedDict()
        self.hits = 0

    def __call__(self, capacity_quantile: str):
        quantile = {} if capacity_quantile == "p50" else {"capacity_quantile": capacity_quantile}

        def estimate(cases: pd.DataFrame, catalogs: Catalogs) -> pd.DataFrame:
            key = (hashlib.sha256(pd.util.hash_pandas_object(cases, index=True).to_numpy().tobytes()
                                  + "|".join(map(str, cases.columns)).encode()).hexdigest(),
                   capacity_quantile, *(id(catalogs.table(name)) for name in _CAPACITY_CATALOGS))
            if key in self.results:
                self.hits += 1
                self.results.move_to_end(key)
                return self.results[key].copy()
            result = estimate_cases(cases, catalogs, **quantile)
            self.results[key] = result.copy()
            if len(self.results) > self.size:
                self.results.popitem(last=False)
            return result

        return estimate


#: Catalogs a candidate's capacity depends on.
_CAPACITY_CATALOGS = ("gpus", "models", "quants", "efficiency", "engines")
_ESTIMATES = EstimateMemo()


def solve_case(base: dict, case: dict, grid_json: str, catalog_paths: list[str]) -> dict:
    """Solve one case; any failure becomes a row with status ``error`` and its message."""
    identity = {**case, "case_id": case_id(case)}
    try:
        grid = Grid.model_validate_json(grid_json)
        data, multipliers = apply_case(base, case, grid)
        scenario = validate_scenario(data, source=f"case {identity['case_id']}")
        catalogs = scaled_catalogs(_grid_catalogs(tuple(catalog_paths)), multipliers)
        estimate = _ESTIMATES(scenario.fleet.capacity_quantile)
        return {**summarize(identity, plan_scenario(scenario, catalogs, estimate=estimate,
                                                    what_if=False))}
    except Exception as error:  # one case's failure is reported in its row, never aborts the grid
        log.debug("case %s failed", identity["case_id"], exc_info=True)
        return {**identity, "status": "error", "message": str(error).splitlines()[0] if str(error) else repr(error)}


class CaseCache(Protocol):
    """Where solved cases' result rows are kept between runs."""

    def load(self, ids: Iterable[str]) -> list[dict]:
        """The stored rows among ``ids``."""

    def save(self, row: dict) -> None:
        """Keep one result row (its ``case_id`` names it)."""


def solve_grid(grid: Grid, base: dict, cases: list[dict], cache: CaseCache, *, catalog_paths=(),
               workers: int = 1, client=None, progress: Callable[[int, int], None] | None = None) -> pd.DataFrame:
    """Every case's result row, in case order; cases already in ``cache`` are not solved again."""
    ids = [case_id(case) for case in cases]
    done = {row["case_id"]: row for row in cache.load(set(ids))}
    pending = [case for case, identity in zip(cases, ids) if identity not in done]
    log.info("%d cases: %d already solved, %d to solve", len(cases), len(done), len(pending))
    arguments = (grid.model_dump_json(), list(map(str, catalog_paths)))
    for row in _solve_all(base, pending, arguments, workers, client):
        cache.save(row)
        done[row["case_id"]] = row
        if progress is not None:
            progress(len(done), len(cases))
    return pd.DataFrame([done[identity] for identity in ids])


def _solve_all(base, pending, arguments, workers, client):
    if not pending:
        return
    if client is not None:
        from distributed import (
            as_completed as dask_completed,  # optional extra, only with a cluster
        )

        futures = [client.submit(solve_case, base, case, *arguments, pure=False) for case in pending]
        for future in dask_completed(futures):
            yield future.result()
        return
    if workers <= 1:
        for case in pending:
            yield solve_case(base, case, *arguments)
        return
    # Workers start from a fresh server process, not a fork of this one: a process that has
    # already run HiGHS (highspy 1.16) hands its forked children a solver that never returns.
    context = multiprocessing.get_context(WORKER_START)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(solve_case, base, case, *arguments) for case in pending]
        for future in as_completed(futures):
            yield future.result()
