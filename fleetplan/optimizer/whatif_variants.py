"""What-if cases solved as variants of one built model.

Cases of a grid that differ only in ``demand_multiplier``, per-GPU ``price_multiplier`` and
``max_gpus`` ask the same question with other numbers (``model_variants.py``). The first case
of such a group is prepared and built once; every other case then needs only its demand table,
its offers' prices and its GPU caps, the variant of the built model and a solve, a few
milliseconds on the grids of ``benchmarks/bench_whatif.py`` instead of a whole plan. The first
case is itself solved as a variant of its own model, so a chunk prepares and builds once.

A case is answered this way only when the answer is the one ``plan_scenario`` gives: the same
periods merge, demand falls in the same buckets, the same GPU types are capped (a cap decides
which swaps dominance allows), and the solve finds a plan within its limits (an infeasible case
needs the elastic model's reasons). Prices decide which configurations are dominated
(``dominance.py``), so one model is built per distinct set of dominated configurations the
group meets; the cost-cover cut's small models are built once per pool
(``model_variants.CoverBuilds``). Otherwise :meth:`solve` returns None and the caller plans the
case in full. The variant's plan is checked against its program (every row and bound) before
it is reported.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass

import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.optimizer.decomposition import solve_fleet
from fleetplan.optimizer.demand import demand_table, workload_buckets
from fleetplan.optimizer.dominance import Comparison, prune_dominated
from fleetplan.optimizer.fleet_problem import Problem
from fleetplan.optimizer.milp import build_model
from fleetplan.optimizer.model_variants import (
    CoverBuilds,
    ModelVariation,
    same_capped_gpus,
    variation_blocker,
)
from fleetplan.optimizer.optimization import plan_status, solve_deadline
from fleetplan.optimizer.period_merging import merge_identical_periods, representative_periods
from fleetplan.optimizer.scenario import Scenario
from fleetplan.optimizer.scenario_files import validate_scenario
from fleetplan.optimizer.scenario_planning import gpu_caps, prepare, solve_options
from fleetplan.optimizer.solver import SolveOptions
from fleetplan.optimizer.whatif_grid import Grid, apply_case, scaled_catalogs, summary_row

logger = logging.getLogger(__name__)


def varies(column: str) -> bool:
    """Whether a case column changes only numbers a built model can take (demand, one GPU
    type's prices, one GPU type's cap); a provider's prices may change which offer is chosen."""
    return column == "demand_multiplier" or column.startswith("max_gpus[") or (
        column.startswith("price_multiplier[") and not column.startswith("price_multiplier[provider:"))


def group_key(case: dict) -> str:
    """Cases with the same key are variants of each other."""
    return json.dumps({k: v for k, v in case.items() if not varies(k)}, sort_keys=True,
                      default=str)


def _price_factors(case: dict) -> dict[str, float]:
    return {column[len("price_multiplier["):-1].lower(): float(value)
            for column, value in case.items()
            if column.startswith("price_multiplier[") and varies(column)}


@dataclass
class CaseVariants:
    """The first case of a group, prepared and built, from which the others are varied."""

    base: dict
    grid: Grid
    first: dict
    original: Problem  # the first case's problem, every period
    merged: Problem  # one period per distinct (month, demand)
    representative: pd.Series
    comparison: Comparison
    variations: dict[tuple[str, ...], ModelVariation]  # by the configurations dominance dropped
    options: SolveOptions
    cover_builds: CoverBuilds  # the cost-cover cut's small models, each built once

    @classmethod
    def of(cls, base: dict, case: dict, grid: Grid, catalogs: Catalogs,
           estimate) -> CaseVariants | None:
        """The variants of ``case``'s group, or None when its model cannot be varied."""
        data, multipliers = apply_case(base, case, grid)
        scenario = validate_scenario(data, source="what-if case")
        prepared = prepare(scenario, scaled_catalogs(catalogs, multipliers), estimate=estimate)
        if "scenario" in prepared.problem.periods:
            logger.debug("what-if variants: demand scenarios are planned case by case")
            return None
        merged, representative = merge_identical_periods(prepared.problem)
        comparison = Comparison.of(merged)
        dropped = comparison.dominated(merged)
        cover_builds = CoverBuilds()
        model = build_model(prune_dominated(merged, dropped)[0], cover_build=cover_builds)
        blocker = variation_blocker(model)
        if blocker:
            logger.debug("what-if variants: each case is planned in full: %s", blocker)
            return None
        return cls(base, grid, case, prepared.problem, merged, representative, comparison,
                   {tuple(dropped): ModelVariation.of(model)}, solve_options(scenario),
                   cover_builds)

    def changed_problem(self, scenario: Scenario, case: dict
                        ) -> tuple[Problem, tuple[str, ...]] | None:
        """The merged, pruned problem of ``case`` and the configurations pruned, or None when
        its periods or demand differ in structure."""
        periods = self.original.periods
        demand = demand_table(scenario, workload_buckets(scenario), periods)
        gpus = self.original.gpus.assign(max_gpus=gpu_caps(scenario))
        original = self.original.with_changes(demand=demand, offers=self._offers(case), gpus=gpus)
        if not same_capped_gpus(original, self.original):  # caps decide which swaps dominate
            return None
        if len(periods) > 1 and not representative_periods(original).equals(self.representative):
            return None
        merged = original.with_changes(
            periods=self.merged.periods,
            demand=demand[demand["period"].isin(self.merged.periods["period"])].reset_index(
                drop=True))
        dropped = self.comparison.dominated(merged)
        return prune_dominated(merged, dropped)[0], tuple(dropped)

    def _offers(self, case: dict) -> pd.DataFrame:
        first, now = _price_factors(self.first), _price_factors(case)
        offers = self.original.offers.copy()
        for gpu in set(first) | set(now):
            rows = offers["gpu"] == gpu
            offers.loc[rows, "usd_per_gpu_hour"] *= now.get(gpu, 1.0) / first.get(gpu, 1.0)
        return offers

    def solve(self, case: dict, identity: dict) -> dict | None:
        """``case``'s result row as a variant, or None when it must be planned in full."""
        data, _ = apply_case(self.base, case, self.grid)
        try:
            scenario = validate_scenario(data, source="what-if case")
        except Exception:  # the full plan reports the error in its row
            return None
        changed = self.changed_problem(scenario, case)
        if changed is None:
            return None
        problem, dropped = changed
        if dropped not in self.variations:
            built = build_model(problem, cover_build=self.cover_builds)
            if variation_blocker(built):
                return None
            self.variations[dropped] = ModelVariation.of(built)
        variation = self.variations[dropped]
        if not variation.fits(problem):
            return None
        model = variation.apply(problem, self.cover_builds)  # a copy: the built one stays unsolved
        if model is None:
            return None
        outcome = solve_fleet(model, self.options, solve_deadline(self.options))
        if not outcome.has_solution:
            return None
        figures = variation.headline(model)
        if not figures["feasible"]:
            logger.warning("what-if variant %s broke its program; planned in full", identity)
            return None
        return summary_row(identity, status=plan_status(outcome, self.options), gap=outcome.gap,
                           usd_per_month=figures["usd_per_month"],
                           tokens_per_month=figures["tokens_per_month"],
                           served_fraction=figures["served_fraction"],
                           gpus_peak=figures["gpus_peak"], solve_seconds=outcome.seconds,
                           message="")


def group_chunks(cases: list[dict], workers: int, most: int = 200) -> list[list[dict]]:
    """Cases grouped by :func:`group_key` (in first-seen order). A group is cut into as many
    chunks as it takes to give every worker one when there are fewer groups than workers, and
    into chunks of at most ``most`` cases (each chunk builds its model once)."""
    groups: dict[str, list[dict]] = {}
    for case in cases:
        groups.setdefault(group_key(case), []).append(case)
    pieces = math.ceil(max(workers, 1) / len(groups)) if groups else 1
    chunks = []
    for members in groups.values():
        size = max(1, min(most, math.ceil(len(members) / pieces)))
        chunks += [members[i:i + size] for i in range(0, len(members), size)]
    return chunks
