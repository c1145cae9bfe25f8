"""What-if grid speed: scenarios/s for a 1,000-scenario grid with 1 and 2 local worker processes.

The grid varies demand (10 values), TPOT SLO (10 values) and the L40S price (10 values) around a
small one-workload scenario (tests/optimizer/fixtures/small_scenario.yaml). With --example, a
grid of demand (5 values) and H100 price (4 values) around the built-in example (two model
pools, 24 hours, reserved terms: its models get the cost-cover cut), also planned case by case
in full for comparison. Then, unless --skip-sweep, the >= 200-million-row sweep through Dask of
bench_distributed_sweep.py (rows/s and peak memory per worker).

Usage: python benchmarks/bench_whatif.py [--quick] [--skip-sweep] [--example]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

BASE = Path(__file__).resolve().parents[1] / "tests" / "optimizer" / "fixtures" / "small_scenario.yaml"


def grid_yaml(n: int) -> str:
    demand = [round(0.5 + 0.25 * i, 2) for i in range(n)]
    tpot = [30 + 5 * i for i in range(n)]
    price = [round(0.6 + 0.1 * i, 2) for i in range(n)]
    return (f"base: {BASE}\naxes:\n  demand_multiplier: {demand}\n  tpot_slo_ms: {tpot}\n"
            f"  price_multiplier: {{l40s: {price}}}\n")


def example_yaml() -> str:
    return ("base: example\naxes:\n  demand_multiplier: [0.6, 0.8, 1.0, 1.2, 1.4]\n"
            "  price_multiplier: {h100-sxm: [0.7, 0.85, 1.0, 1.15]}\n")


def run(workers: int, n: int, text: str | None = None) -> tuple[int, float, int]:
    from fleetplan.exports.whatif_cache import run_grid
    from fleetplan.optimizer.whatif_grid import expand, load_grid

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "grid.yaml"
        path.write_text(text or grid_yaml(n))
        grid, base = load_grid(path)
        cases = expand(grid)
        start = time.perf_counter()
        results = run_grid(grid, base, cases, Path(folder) / "cases", workers=workers)
        seconds = time.perf_counter() - start
    solved = int(results["status"].isin(["optimal", "time_limit"]).sum())
    return len(cases), seconds, solved


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a 64-scenario grid and a small sweep")
    parser.add_argument("--skip-sweep", action="store_true", help="only the what-if grid")
    parser.add_argument("--example", action="store_true",
                        help="also a 20-scenario grid around the built-in example")
    args = parser.parse_args()
    n = 4 if args.quick else 10
    rates = {}
    for workers in (1, 2):
        count, seconds, solved = run(workers, n)
        rates[workers] = count / seconds
        print(f"{workers} worker(s): {count} scenarios ({solved} solved, {count - solved} infeasible or failed) in "
              f"{seconds:.1f} s = {rates[workers]:.2f} scenarios/s")
    print(f"speed-up with 2 workers: {rates[2] / rates[1]:.2f}x")
    if args.example:
        example(rates)
    if not args.skip_sweep:
        import subprocess
        import sys

        command = [sys.executable, str(Path(__file__).with_name("bench_distributed_sweep.py")), "--workers", "2"]
        subprocess.run(command + (["--quick"] if args.quick else []), check=True)


def example(rates: dict) -> None:
    """The example grid with 2 workers, then every case planned in full in this process."""
    from fleetplan.optimizer.whatif_grid import expand, load_grid
    from fleetplan.optimizer.whatif_solving import solve_case

    count, seconds, solved = run(2, 0, example_yaml())
    print(f"example grid, 2 worker(s): {count} scenarios ({solved} solved) in {seconds:.1f} s = "
          f"{count / seconds:.2f} scenarios/s")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "grid.yaml"
        path.write_text(example_yaml())
        grid, base = load_grid(path)
        start = time.perf_counter()
        for case in expand(grid):
            solve_case(base, case, grid.model_dump_json(), [])
        full = time.perf_counter() - start
    print(f"example grid, each case planned in full in one process: {full:.1f} s = "
          f"{count / full:.2f} scenarios/s")


if __name__ == "__main__":
    main()
