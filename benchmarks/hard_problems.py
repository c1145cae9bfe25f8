"""The hard scenarios (``benchmarks/hard_scenarios/``) shared by the benchmarks that plan them:
their files in seed order, and each one's problem as ``fleetplan plan`` prepares it (identical
periods merged, dominated configurations pruned)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from fleetplan.optimizer.dominance import prune_dominated
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.period_merging import merge_identical_periods
from fleetplan.optimizer.scenario_files import load_scenario
from fleetplan.optimizer.scenario_planning import prepare

SCENARIOS = Path(__file__).resolve().parent / "hard_scenarios"


def seed_of(path: Path) -> str:
    """The seed a scenario file is named for (``random_38.yaml``: ``38``)."""
    return path.stem.split("_")[1]


def scenario_paths(only: str = "") -> list[Path]:
    """The scenario files in seed order; ``only`` (comma-separated seeds) keeps those."""
    paths = sorted(SCENARIOS.glob("random_*.yaml"), key=lambda p: int(seed_of(p)))
    wanted = {seed.strip() for seed in only.split(",") if seed.strip()}
    return [p for p in paths if seed_of(p) in wanted] if wanted else paths


def planned_problems(paths: list[Path]) -> Iterator[tuple[Path, Problem]]:
    """(path, problem) of each scenario as the planner prepares it; a refused one is printed
    and skipped."""
    for path in paths:
        try:
            merged, _ = merge_identical_periods(prepare(load_scenario(path)).problem)
            problem, _ = prune_dominated(merged)
        except Exception as error:  # noqa: BLE001 - a refused scenario is reported, not fatal
            print(f"{path.stem:>11}  refused: {type(error).__name__}")
            continue
        yield path, problem
