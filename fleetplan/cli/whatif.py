"""``fleetplan whatif``: solve a grid of scenario variants and compare them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Annotated

import typer

from fleetplan.catalogs import load_catalogs
from fleetplan.cli.options import (
    CatalogOption,
    MaxAgeOption,
    MixOption,
    PriceRuleOption,
    ProviderOption,
    RegionOption,
)
from fleetplan.cli.plan import with_price_options
from fleetplan.cli.progress import progress_bar
from fleetplan.errors import FleetplanError, InvalidValueError, one_line, within
from fleetplan.exports import write_plan
from fleetplan.exports.whatif_cache import run_grid
from fleetplan.exports.whatif_outputs import write_grid
from fleetplan.optimizer.candidates import canonical_names
from fleetplan.optimizer.scenario_files import SCENARIO_FIELD, validate_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario
from fleetplan.optimizer.whatif_grid import (
    GRID_FIELD,
    base_axis_values,
    check_capped_gpus,
    check_gpu_ids,
    expand,
    load_grid,
)
from fleetplan.sweeps.distributed import dask_client
from fleetplan.sweeps.efficiencies import WILDCARD


def whatif_command(
    grid_file: Annotated[Path, typer.Argument(help="Grid file (YAML or TOML): base scenario plus axes or cases")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Comparison .xlsx, .parquet (folder) or .csv")],
    workers: Annotated[int, typer.Option(help="Local worker processes (ignored with --scheduler)")] = 2,
    scheduler: Annotated[str | None, typer.Option(help="Solve on this Dask scheduler (or $FLEETPLAN_SCHEDULER)")] = None,
    resume: Annotated[bool, typer.Option(help="Skip cases already solved in OUTPUT.cases/")] = True,
    base_plan: Annotated[bool, typer.Option(help="Also solve the base scenario and write its full plan")] = True,
    catalog: CatalogOption = None,
    price_choice: PriceRuleOption = None, provider: ProviderOption = None, region: RegionOption = None,
    max_price_age_days: MaxAgeOption = None, mix_providers: MixOption = False,
) -> None:
    """Solve every scenario of a what-if grid (in parallel, resumable) and write the comparison.

    The price options and --catalog files apply to the base scenario, so to every case."""
    if not grid_file.is_file():
        message = f"grid file {grid_file} does not exist"
        raise InvalidValueError(message)
    if workers < 1:
        message = f"workers must be >= 1, got {workers}"
        raise InvalidValueError(message)
    grid, base = load_grid(grid_file)
    base = with_price_options(base, catalog, price_choice, provider, region, max_price_age_days, mix_providers)
    catalogs = _catalogs(base)
    # checks made after the files were read name the file whose field they are about
    base_file = "example scenario" if grid.base == "example" else str(grid_file.parent / grid.base)
    with within(base_file, SCENARIO_FIELD), within(str(grid_file), GRID_FIELD):
        scenario = validate_scenario(base, source=base_file)
        ids = {}  # the workloads' models and quantizations, whose rows Sources lists
        if catalogs is not None:  # a base the catalogs refuse would fail every case the same way
            names = canonical_names(scenario, catalogs)
            ids = {"model": names["models"], "quant": [q for qs in names["quants"] for q in qs]}
        results, cases, plan = _solved(grid, base, catalogs, output, workers, scheduler, resume,
                                       base_plan)
    axes = list(dict.fromkeys(column for case in cases for column in case if column != "name"))
    write_grid(results, output, axes=axes, base_fleet=None if plan is None else plan.fleet,
               metadata={"grid": str(grid_file), "cases": len(cases), "base": grid.base,
                         "price_rule": (base.get("fleet") or {}).get("price_rule", "cheapest")},
               base_usd_per_month=None if plan is None else plan.usd_per_month,
               catalogs=catalogs,
               prices_used=None if plan is None else plan.assumptions.get("prices_used"),
               base_values=base_axis_values(scenario, axes),
               engine=None if "engine" in axes else scenario.fleet.engine or WILDCARD,
               ids=ids)
    failed = int((~results["status"].isin(["optimal", "time_limit"])).sum())
    typer.echo(f"wrote {output}: {len(results)} scenarios, {failed} infeasible or failed", err=True)


def _solved(grid, base, catalogs, output: Path, workers: int, scheduler: str | None, resume: bool,
            base_plan: bool):
    """The grid's cases solved (resumed from ``OUTPUT.cases/`` unless not ``resume``), the cases
    and the base scenario's full plan (None without ``base_plan``)."""
    if catalogs is not None:
        check_gpu_ids(grid, catalogs.gpus.index)
    check_capped_gpus(grid, base)
    cases = expand(grid)
    folder = output.with_name(output.name + ".cases")
    if not resume and folder.exists():
        shutil.rmtree(folder)
    update, close = progress_bar()
    scheduler = scheduler or os.environ.get("FLEETPLAN_SCHEDULER")
    try:
        results = _run(grid, base, cases, folder, workers, scheduler, update, base.get("catalogs", []))
    finally:
        close()
    return results, cases, _base_plan(base, output) if base_plan else None


def _run(grid, base, cases, folder, workers, scheduler, update, catalogs):
    def report(text: str) -> None:
        typer.echo(f"warning: {one_line(text)}", err=True)

    if scheduler:
        with dask_client(scheduler=scheduler) as client:
            return run_grid(grid, base, cases, folder, catalog_paths=catalogs, client=client, progress=update,
                            report=report)
    return run_grid(grid, base, cases, folder, catalog_paths=catalogs, workers=workers, progress=update,
                    report=report)


def _catalogs(base: dict):
    """The base scenario's catalogs for the Sources sheet (None when its files do not load here)."""
    try:
        return load_catalogs(base.get("catalogs", []))
    except FleetplanError:
        return None


def _base_plan(base: dict, output: Path):
    plan = plan_scenario(validate_scenario(base, source="base scenario"), what_if=False)
    write_plan(plan, output.with_name(output.stem + "-base.xlsx"))
    return plan


def register(app: typer.Typer) -> None:
    app.command("whatif")(whatif_command)
