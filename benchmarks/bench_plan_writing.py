"""How long ``fleetplan plan`` takes to write a plan, by output, against the time it keeps for
writing (``cli/command_clock.py``'s ``writing_s``).

Each scenario of ``benchmarks/hard_scenarios/`` named is planned once (``--time-limit``, no
marginal values); its plan is then written as JSON, a workbook, Parquet and a folder of CSVs,
its summary printed (to nowhere) and its FOCUS CSV written, each timed once. The scenario's
demand rows (a workload's bucket in a period with demand) are what the estimate reads. Each
time is printed next to its estimate, and the largest ratio of measured to estimated time per
output closes the run: above 1, the estimate kept too little.

Run from the repository's root (or with its parent on PYTHONPATH); another checkout's
``fleetplan`` on PYTHONPATH first measures its writers (the estimate is left out when that
checkout has none).

Usage: python benchmarks/bench_plan_writing.py [--time-limit 4] [--only 150,204,228]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import logging
import tempfile
import time
from pathlib import Path

from fleetplan.cli.plan import write_plan_file
from fleetplan.cli.plan_summary import print_plan
from fleetplan.exports.focus import write_focus_csv
from fleetplan.optimizer.scenario_files import load_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario, prepare

try:  # a checkout from before the command's clock has no estimate
    from fleetplan.cli.command_clock import EXIT_S, FOCUS_S, SUMMARY_S, writing_s
except ImportError:
    writing_s = None

SCENARIOS = Path(__file__).resolve().parent / "hard_scenarios"
#: Twelve hard scenarios that end with a plan or an elastic one, 12 to 36,288 demand rows.
DEFAULT = "150,204,228,279,186,134,25,11,188,1,41,253"
FILES = (".json", ".xlsx", ".parquet", ".csv")
START = dt.date(2027, 1, 1)


def timed(write) -> float:
    """Seconds ``write()`` takes [s]."""
    started = time.perf_counter()
    write()
    return time.perf_counter() - started


def written_seconds(plan, folder: Path) -> dict[str, float]:
    """Seconds each output of ``plan`` takes to write into ``folder`` [s]."""
    seconds = {suffix: timed(lambda s=suffix: write_plan_file(plan, folder / f"plan{s}", START))
               for suffix in FILES}
    with contextlib.redirect_stdout(io.StringIO()):
        seconds["summary"] = timed(lambda: print_plan(plan))
    seconds["focus"] = timed(lambda: write_focus_csv(plan, folder / "charges.csv", START))
    return seconds


def estimated_seconds(rows: int) -> dict[str, float]:
    """What ``writing_s`` keeps for each output of a plan of ``rows`` demand rows [s], its
    exit time left out (nothing here exits)."""
    if writing_s is None:
        return {}
    files = {suffix: writing_s(rows, suffix, False, False) - EXIT_S for suffix in FILES}
    return {**files, "summary": SUMMARY_S, "focus": FOCUS_S}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=float, default=4.0)
    parser.add_argument("--only", default=DEFAULT, help="scenario numbers, comma-separated")
    arguments = parser.parse_args()
    logging.disable(logging.CRITICAL)  # the plans' own warnings are not what is measured
    worst: dict[str, float] = {}
    for number in arguments.only.split(","):
        scenario = load_scenario(SCENARIOS / f"random_{number.strip()}.yaml")
        scenario = scenario.model_copy(update={"solver": scenario.solver.model_copy(
            update={"time_limit_s": arguments.time_limit})})
        plan = plan_scenario(scenario, what_if=False)
        problem = prepare(scenario).problem
        rows = int((problem.demand["req_s"] > 0).sum())
        with tempfile.TemporaryDirectory() as folder:
            seconds = written_seconds(plan, Path(folder))
        estimate = estimated_seconds(rows)
        cells = []
        for output, taken in seconds.items():
            cells.append(f"{output} {taken:.2f}" + (
                f"/{estimate[output]:.2f}" if output in estimate else ""))
            if output in estimate:
                worst[output] = max(worst.get(output, 0.0), taken / estimate[output])
        print(f"{'random_' + number.strip():<11} {plan.status:<11} {rows:>6} demand rows  "
              + "  ".join(cells), flush=True)
    print("seconds written" + ("/kept" if worst else "") + " by output, one run each")
    if worst:
        print("largest measured/kept: " + ", ".join(f"{k} {v:.2f}" for k, v in worst.items()))


if __name__ == "__main__":
    main()
