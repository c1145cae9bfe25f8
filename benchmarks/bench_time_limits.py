"""Plans under a short time limit: how many hard scenarios end with a plan, and how long the
whole call takes.

The scenarios in ``benchmarks/hard_scenarios/`` are random but valid scenarios (up to four
workloads, 24- and 168-hour profiles, spot caps, reserved terms, N+k, budgets, availability
caps, fleet-simplicity rules, disaggregated pairs, hosted APIs, demand scenarios, today's
fleet), kept because at ``--time-limit 5`` they once ended without a plan or ran for more than
15 s. Each is planned by ``fleetplan plan --time-limit T --no-what-if --allow-gap`` in a fresh
process, and the wall time of the whole call is measured, process start and imports included.

Outcomes: ``optimal`` or ``time_limit`` (a plan), ``infeasible`` (no plan exists: the elastic
plan says why), ``no_solution`` (none found in the time), ``refused`` (exit 2: the input is
rejected with a one-line error), ``error`` (any other exit). A plan's cost and its gap follow
its wall time; plans without a gap (no bound proven) are counted and named.

``--outputs`` also exercises what the plan is written to: the call prints its summary (no
``-q``) and writes the FOCUS CSV, then ``fleetplan export`` turns the plan into a workbook and
Parquet; a failure of any is an ``error``, and the workbook cells that kept the plan's number
instead of a live formula are counted. The plan's total over the horizon is then read back from
every output (the printed summary to the dollar, the FOCUS CSV's billed cost, the Parquet
summary and chargeback, the workbook's Summary) and each that differs from the plan JSON's by
more than a cent is named.

Usage: python benchmarks/bench_time_limits.py [--time-limit 5] [--tree PATH] [--only 38,282]
[--outputs]

``--tree`` plans with another checkout's ``fleetplan`` package (its parent directory put first
on PYTHONPATH), to compare two commits on the same scenarios.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import openpyxl
import pyarrow.compute as pc
import pyarrow.parquet as pq

SCENARIOS = Path(__file__).resolve().parent / "hard_scenarios"
ROOT = Path(__file__).resolve().parents[1]

#: Exit codes of ``fleetplan plan`` that come with a plan file: a plan, none, one above the gap.
PLAN_EXITS = (0, 1, 3)


def plan_once(path: Path, time_limit: float, tree: Path,
              outputs: bool = False) -> tuple[str, float, dict]:
    """(outcome, wall seconds, the plan's cost and gap) of one ``fleetplan plan`` call on
    ``path``; with ``outputs`` the plan's files too (module docstring)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "plan.json"
        command = [sys.executable, "-m", "fleetplan.cli", "plan", str(path), "-o", str(out),
                   "--time-limit", str(time_limit), "--no-what-if", "--allow-gap"]
        command += ["--focus", str(Path(folder) / "charges.csv")] if outputs else ["-q"]
        environment = dict(os.environ, PYTHONPATH=str(tree))
        started = time.perf_counter()
        # run from the temporary folder: ``python -m`` puts the working directory first on the
        # path, which from the repository's root would shadow ``tree``
        done = subprocess.run(command, capture_output=True, text=True, env=environment,
                              check=False, cwd=folder)
        seconds = time.perf_counter() - started
        if done.returncode == 2:
            return "refused", seconds, {}
        if done.returncode not in PLAN_EXITS or not out.exists():
            return "error", seconds, {}
        plan = json.loads(out.read_text())
        figures = {k: plan.get(k) for k in ("objective_usd", "gap")}
        if outputs:
            kept = _exported(out, environment)
            if kept is None:
                return "error", seconds, figures
            figures["kept"] = kept
            figures["differ"] = _totals_differ(Path(folder), done.stdout, plan)
        return plan["status"], seconds, figures


def _output_totals(folder: Path, printed: str) -> dict[str, float]:
    """The plan's total over the horizon [USD] as each of its outputs in ``folder`` gives it."""
    totals = {}
    found = re.search(r"cost: \$[\d,]+ per month, \$([\d,]+) over", printed)
    if found:
        totals["printed summary"] = float(found.group(1).replace(",", ""))
    with open(folder / "charges.csv", newline="", encoding="utf-8") as charges:
        totals["FOCUS CSV"] = sum(float(row["BilledCost"]) for row in csv.DictReader(charges))
    tables = folder / "plan.parquet"
    totals["Parquet summary"] = float(
        pq.read_table(tables / "summary.parquet").column("objective_usd")[0].as_py())
    if (tables / "chargeback.parquet").exists():
        totals["Parquet chargeback"] = float(pc.sum(
            pq.read_table(tables / "chargeback.parquet").column("usd")).as_py() or 0.0)
    summary = openpyxl.load_workbook(folder / "plan.xlsx", data_only=True)["Summary"]
    for label, value in summary.iter_rows(min_col=1, max_col=2, values_only=True):
        if str(label).startswith("Total over the horizon"):
            totals["workbook Summary"] = float(value)
    return totals


def _totals_differ(folder: Path, printed: str, plan: dict) -> list[str]:
    """The outputs whose total over the horizon is not the plan's: by more than a cent, or
    (the printed summary, in whole dollars) more than a dollar."""
    total = plan.get("objective_usd")
    if total is None or not math.isfinite(total):
        return []
    return [name for name, value in _output_totals(folder, printed).items()
            if abs(value - total) > (1.0 if name == "printed summary" else 0.01)]


def _exported(plan: Path, environment: dict) -> int | None:
    """Workbook cells that kept the plan's number, once ``plan`` is exported to a workbook and
    to Parquet; None when an export fails."""
    kept = 0
    for target in ("plan.xlsx", "plan.parquet"):
        command = [sys.executable, "-m", "fleetplan.cli", "export", str(plan), "-o",
                   str(plan.parent / target)]
        done = subprocess.run(command, capture_output=True, text=True, env=environment,
                              check=False, cwd=plan.parent)
        if done.returncode != 0:
            return None
        found = re.search(r"(\d+) workbook cells kept the plan's numbers", done.stderr)
        kept += int(found.group(1)) if found else 0
    return kept


def _figures_text(figures: dict) -> str:
    """A plan's cost over the horizon and its gap, when it has them."""
    cost, gap = figures.get("objective_usd"), figures.get("gap")
    if cost is None or not math.isfinite(cost):
        return ""
    gap_text = f", gap {gap:.2%}" if gap is not None and math.isfinite(gap) else ""
    kept = figures.get("kept")
    kept_text = f", {kept} workbook cells kept the plan's number" if kept else ""
    differ = figures.get("differ")
    differ_text = f", total differs in: {', '.join(differ)}" if differ else ""
    return f"  ${cost:,.0f}{gap_text}{kept_text}{differ_text}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-limit", type=float, default=5.0, help="[s]")
    parser.add_argument("--tree", type=Path, default=ROOT,
                        help="directory holding the fleetplan package to run")
    parser.add_argument("--only", default="", help="comma-separated seeds")
    parser.add_argument("--outputs", action="store_true",
                        help="print the summary and write FOCUS, XLSX and Parquet too")
    args = parser.parse_args()
    paths = sorted(SCENARIOS.glob("random_*.yaml"), key=lambda p: int(p.stem.split("_")[1]))
    if args.only:
        wanted = {f"random_{seed.strip()}" for seed in args.only.split(",")}
        paths = [p for p in paths if p.stem in wanted]
    outcomes, walls, kept, differ, unbounded = Counter(), [], [], [], []
    for path in paths:
        outcome, seconds, figures = plan_once(path, args.time_limit, args.tree, args.outputs)
        outcomes[outcome] += 1
        walls.append(seconds)
        kept += [figures["kept"]] if figures.get("kept") else []
        differ += [path.stem] if figures.get("differ") else []
        gap = figures.get("gap")
        if outcome in ("optimal", "time_limit") and (gap is None or not math.isfinite(gap)):
            unbounded.append(path.stem)
        print(f"{path.stem:>12}  {outcome:<12} {seconds:6.1f} s{_figures_text(figures)}",
              flush=True)
    planned = outcomes["optimal"] + outcomes["time_limit"]
    over = sum(w > args.time_limit + 1.0 for w in walls)
    print(f"\n{len(paths)} scenarios at --time-limit {args.time_limit:g}: "
          f"{planned} with a plan ({outcomes['optimal']} optimal, "
          f"{outcomes['time_limit']} time_limit), {outcomes['infeasible']} infeasible, "
          f"{outcomes['no_solution']} no_solution, {outcomes['refused']} refused, "
          f"{outcomes['error']} errors; plans without a bound: {len(unbounded)} "
          f"{', '.join(unbounded)}".rstrip())
    p90 = statistics.quantiles(walls, n=10, method="inclusive")[-1] if len(walls) > 1 else walls[0]
    print(f"wall time of the whole call: median {statistics.median(walls):.1f} s, "
          f"90th percentile {p90:.1f} s, "
          f"max {max(walls):.1f} s; {over} over the limit + 1 s")
    if args.outputs:
        print(f"outputs: {len(kept)} workbooks kept the plan's number in place of a formula "
              f"in {sum(kept)} cells; {len(differ)} plans whose outputs disagree on the total "
              f"{', '.join(differ)}".rstrip())


if __name__ == "__main__":
    main()
