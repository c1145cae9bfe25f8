"""``fleetplan plan``, ``fleetplan schema`` and ``fleetplan example``.

``fleetplan plan`` exits 0 with a plan that serves every request, 1 when demand cannot be met
(the elastic plan and its reasons are still written), 2 on bad input, 3 when the time limit
stopped the solve above the accepted gap (the plan is still written; ``--allow-gap`` exits 0).
"""

from __future__ import annotations

import datetime as dt
import json
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from fleetplan.catalogs import PriceRule
from fleetplan.cli.command_clock import command_elapsed_s, writing_s
from fleetplan.cli.options import (
    CatalogOption,
    MaxAgeOption,
    MixOption,
    PriceRuleOption,
    ProviderOption,
    RegionOption,
)
from fleetplan.cli.plan_summary import print_plan
from fleetplan.errors import InvalidValueError, relocated, within
from fleetplan.exports import write_plan
from fleetplan.exports.atomic import write_text_atomic
from fleetplan.exports.focus import write_focus_csv
from fleetplan.exports.plan_json import write_plan_csv, write_plan_json
from fleetplan.exports.plan_quantities import first_of_next_month
from fleetplan.optimizer.current_fleet_inputs import (
    CURRENT_ROW,
    current_csv_line,
    read_current_csv,
)
from fleetplan.optimizer.example import EXAMPLE_YAML, example_scenario
from fleetplan.optimizer.fleet_plan import FleetPlan
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.scenario import scenario_json_schema
from fleetplan.optimizer.scenario_files import SCENARIO_FIELD, load_scenario, validate_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario

DEFAULT_OUTPUT = "fleetplan-plan.xlsx"
EXPORTED_SUFFIXES = (".xlsx", ".parquet")


def check_output(path: Path) -> None:
    """Reject an output name no writer takes, before spending time on the solve."""
    if path.suffix.lower() not in (".json", ".csv", "", *EXPORTED_SUFFIXES):
        message = f"-o {path}: the plan file name must end with .xlsx, .parquet, .json or .csv"
        raise InvalidValueError(message)


def write_plan_file(plan: FleetPlan, path: Path, start_date: dt.date | None = None) -> Path:
    """Write ``plan`` by suffix: .json, .csv (a folder of CSVs), .xlsx (months from
    ``start_date``) or .parquet."""
    check_output(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        return write_plan_json(plan, path)
    if suffix == ".csv" or (not suffix and not path.is_file()):
        return write_plan_csv(plan, path.with_suffix("") if suffix else path)
    return Path(write_plan(plan, path, start_date=start_date))


def plan_writing_s(problem: Problem, suffix: str, printing: bool, focus: bool) -> float:
    """Seconds to keep for writing the plan of ``problem`` [s] (``command_clock.writing_s``)."""
    return writing_s(int((problem.demand["req_s"] > 0).sum()), suffix, printing, focus)


def parse_date(text: str | None) -> dt.date:
    """``--start-date`` as a date; default the first of next month."""
    if not text:
        return first_of_next_month()
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError:
        message = f"--start-date must be a date such as 2027-01-01, got '{text}'"
        raise InvalidValueError(message) from None


def with_price_options(scenario: dict, catalogs: list | None, choice: str | None, provider: str | None,
                       region: str | None, max_age_days: int | None, mix_providers: bool) -> dict:
    """A scenario mapping with the command line's price rule and catalog files; options not
    given keep the scenario's own."""
    if max_age_days is not None:  # the option's own message, not the scenario field's
        PriceRule(max_age_days=max_age_days)
    data = {**scenario, "fleet": dict(scenario.get("fleet") or {})}
    given = {"price_rule": choice, "provider": provider, "region": region, "max_price_age_days": max_age_days,
             "mix_providers": mix_providers or None}
    data["fleet"].update({k: v for k, v in given.items() if v is not None})
    if catalogs:
        data["catalogs"] = [*(scenario.get("catalogs") or []), *map(str, catalogs)]
    return data


def plan_command(
    scenario: Annotated[Path | None, typer.Argument(
        help="Scenario file (.yaml or .toml); default: the built-in example")] = None,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="Write .xlsx, .parquet, .json or .csv (a folder of CSV tables); "
                               f"default: {DEFAULT_OUTPUT}")] = None,
    time_limit_s: Annotated[float | None, typer.Option(
        "--time-limit", help="Time limit of the whole command [s], from its start to the plan "
                             "written; default: the scenario's solver.time_limit_s")] = None,
    what_if: Annotated[bool | None, typer.Option(
        "--what-if/--no-what-if", help="Price binding limits by re-solving")] = None,
    allow_gap: Annotated[bool, typer.Option(
        "--allow-gap", help="Exit 0 even when the time limit left a gap above solver.mip_gap")]
    = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Do not print the summary")] = False,
    start_date: Annotated[str | None, typer.Option(
        help="First month of the plan, YYYY-MM-DD (workbook months, and month 0 of today's fleet's end "
             "dates; sets fleet.start_date); default: fleet.start_date, else the first of next month")] = None,
    focus: Annotated[Path | None, typer.Option(
        "--focus", help="Also write the planned charges as a FOCUS 1.2 CSV (FinOps cost and usage data)")] = None,
    catalog: CatalogOption = None,
    price_choice: PriceRuleOption = None, provider: ProviderOption = None, region: RegionOption = None,
    max_price_age_days: MaxAgeOption = None, mix_providers: MixOption = False,
    current: Annotated[Path | None, typer.Option(
        "--current", help="Today's fleet as a CSV (the columns of fleet.current); replaces the "
                          "scenario's fleet.current")] = None,
) -> None:
    """Find the cheapest GPU fleet for a scenario and write the plan.

    The price options override the scenario's fleet.price_rule, provider, region,
    max_price_age_days and mix_providers; --catalog files join its catalogs.
    """
    if output is not None:
        check_output(output)
    loaded = example_scenario() if scenario is None else load_scenario(scenario)
    data = with_price_options(loaded.model_dump(), catalog, price_choice, provider, region, max_price_age_days,
                              mix_providers)
    if current is not None:
        data["fleet"]["current"] = read_current_csv(current)
    if start_date is not None:  # one month 0 for the workbook and for today's fleet's end dates
        data["fleet"]["start_date"] = parse_date(start_date)
    csv_line = None if current is None else current_csv_line(current)
    with relocated(CURRENT_ROW, csv_line):
        loaded = validate_scenario(data, source=str(scenario or "example"))
    first_month = loaded.fleet.start_date or parse_date(None)
    if time_limit_s is not None:
        if not time_limit_s > 0:
            message = f"--time-limit must be > 0, got {time_limit_s:g}"
            raise InvalidValueError(message)
        solver = loaded.solver.model_copy(update={"time_limit_s": time_limit_s})
        loaded = loaded.model_copy(update={"solver": solver})
    output = output if output is not None else Path(DEFAULT_OUTPUT)
    kept_s = partial(plan_writing_s, suffix=output.suffix, printing=not quiet,
                     focus=focus is not None)
    with (within(None if scenario is None else str(scenario), SCENARIO_FIELD),
          relocated(CURRENT_ROW, csv_line)):
        plan = plan_scenario(loaded, what_if=what_if, spent_s=command_elapsed_s(), kept_s=kept_s)
    written = write_plan_file(plan, output, first_month)
    if not quiet:
        print_plan(plan)
    typer.echo(f"wrote {written}", err=True)
    if focus is not None:
        typer.echo(f"wrote {write_focus_csv(plan, focus, first_month)}", err=True)
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
