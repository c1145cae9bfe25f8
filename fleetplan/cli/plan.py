"""``fleetplan plan``, ``fleetplan schema`` and ``fleetplan example``.

``fleetplan plan`` exits 0 with a plan that serves every request, 1 when demand cannot be met
(the elastic plan and its reasons are still written), 2 on bad input, 3 when the time limit
stopped the solve above the accepted gap (the plan is still written; ``--allow-gap`` exits 0).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from fleetplan.errors import InvalidValueError
from fleetplan.exports import write_plan
from fleetplan.exports.atomic import write_text_atomic
from fleetplan.exports.plan_json import write_plan_csv, write_plan_json
from fleetplan.optimizer.example import EXAMPLE_YAML, example_scenario
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.scenario import scenario_json_schema
from fleetplan.optimizer.scenario_files import load_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario

DEFAULT_OUTPUT = "fleetplan-plan.xlsx"
EXPORTED_SUFFIXES = (".xlsx", ".parquet")


def check_output(path: Path) -> None:
    """Reject an output name no writer takes, before spending time on the solve."""
    if path.suffix.lower() not in (".json", ".csv", "", *EXPORTED_SUFFIXES):
        message = f"-o {path}: the plan file name must end with .xlsx, .parquet, .json or .csv"
        raise InvalidValueError(message)


def write_plan_file(plan: FleetPlan, path: Path) -> Path:
    """Write ``plan`` by suffix: .json, .csv (a folder of CSVs), .xlsx or .parquet."""
    check_output(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        return write_plan_json(plan, path)
    if suffix == ".csv" or (not suffix and not path.is_file()):
        return write_plan_csv(plan, path.with_suffix("") if suffix else path)
    return Path(write_plan(plan, path))


def plan_command(
    scenario: Annotated[Path | None, typer.Argument(
        help="Scenario file (.yaml or .toml); default: the built-in example")] = None,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Write .xlsx, .parquet, .json or .csv (a folder of CSV tables); "
                               f"default: {DEFAULT_OUTPUT}")] = None,
    time_limit_s: Annotated[float | None, typer.Option(
        "--time-limit", help="Time limit of the whole optimization [s]; default: the "
                             "scenario's")] = None,
    what_if: Annotated[bool | None, typer.Option(
        "--what-if/--no-what-if", help="Price binding limits by re-solving")] = None,
    allow_gap: Annotated[bool, typer.Option(
        "--allow-gap", help="Exit 0 even when the time limit left a gap above solver.mip_gap")]
    = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Do not print the summary")] = False,
) -> None:
    """Find the cheapest GPU fleet for a scenario and write the plan."""
    if output is not None:
        check_output(output)
    loaded = example_scenario() if scenario is None else load_scenario(scenario)
    if time_limit_s is not None:
        if not time_limit_s > 0:
            message = f"--time-limit must be > 0, got {time_limit_s:g}"
            raise InvalidValueError(message)
        solver = loaded.solver.model_copy(update={"time_limit_s": time_limit_s})
        loaded = loaded.model_copy(update={"solver": solver})
    plan = plan_scenario(loaded, what_if=what_if)
    written = write_plan_file(plan, output if output is not None else Path(DEFAULT_OUTPUT))
    if not quiet:
        typer.echo(plan.summary_text())
    typer.echo(f"wrote {written}", err=True)
    if not plan.feasible:
        raise typer.Exit(code=1)
    if plan.status == "time_limit" and not allow_gap:
        raise typer.Exit(code=3)


def schema_command(
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Write the schema to this file; default: print")] = None,
) -> None:
    """Print the JSON Schema of scenario files (for editor completion and checks)."""
    text = json.dumps(scenario_json_schema(), indent=2) + "\n"
    if output is None:
        typer.echo(text, nl=False)
    else:
        write_text_atomic(output, text)
        typer.echo(f"wrote {output}", err=True)


def example_command() -> None:
    """Print the example scenario, commented, to start a scenario from."""
    typer.echo(EXAMPLE_YAML, nl=False)


def register(app: typer.Typer) -> None:
    """Add ``plan``, ``schema`` and ``example`` to the CLI."""
    app.command("plan")(plan_command)
    app.command("schema")(schema_command)
    app.command("example")(example_command)
