"""The optimizer's input as plain tables: what the MILP needs, nothing about where it came from.

A :class:`Problem` can be built from a scenario (``candidates.build_problem``) or directly from
numbers (tests, the Mélange toy example, benchmarks): capacities and prices are just columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import EXISTING_PRICING, HOURS_PER_MONTH, RESERVED_TERM_MONTHS


@dataclass
class Problem:
    """Everything the fleet MILP reads, as tidy tables.

    Tables and columns (units in names):
        workloads: workload, pool (replicas of a pool may serve any of its workloads; one
            model per pool), redundancy_k [replicas].
        periods: period (0..T-1), month, hour (-1 when demand is flat over the day),
            hours [h of the horizon this period stands for], month_weight [horizon months the
            period's month stands for: 1 with growth, horizon_months without].
        demand: workload, bucket, period, req_s [requests/s]; rows with req_s <= 0 ignored.
        configs: config, pool, gpu, tp [GPUs per replica].
        candidates: workload, bucket, config, req_s_per_replica [requests/s one replica
            completes at 100 % utilization while meeting the workload's SLOs; <= 0 unusable];
            optional route and stages: a route is what a request is sent to, served by
            ``stages`` configurations at once (a disaggregated pair: a prefill and a decode
            configuration, one row each); by default every configuration is its own route.
        offers: gpu, pricing_type, usd_per_gpu_hour [USD/GPU-hour], max_gpus [GPUs of this
            pricing type at any time; NaN = no cap].
        gpus: gpu, gpus_per_node [GPUs bought together; 1 = any count], max_gpus [cap over all
            pricing types at any time; NaN = no cap].
    Scalars: target_utilization [fraction of a replica's capacity planned], hours_per_month
    [h], horizon_months [months], budget_usd_per_month [USD; None = no cap], spot_max_share
    [fraction of GPUs in a period that may be spot; None = no cap], max_configs_per_workload
    [routes one workload may use over the horizon; None = any], one_quant_per_model [every
    model in one quantization; needs configs.model and configs.quant], cvar_alpha and
    cvar_weight [CVaR level and weight in the objective, with demand scenarios only].
    With demand scenarios (``stochastic_problem.py``) every period belongs to one scenario:
    periods then also carry scenario and probability, and hours are weighted by probability.
    model in one quantization; needs configs.model and configs.quant].
    Supply beyond GPUs (empty tables = none; ``power_envelope.py``, ``hosted_apis.py``):
        sites: site, kw [kW the site may draw], pue [facility kW per IT kW].
        site_gpus: site, gpu, pricing_type, kw_per_gpu [IT kW per GPU bought, host share
            included]: the offers whose GPUs draw on the site.
        apis: api, max_requests_per_min, max_tokens_per_min [rate limits; NaN = none] (and
            descriptive columns: provider, model, prices, ttft_ms, tpot_ms, source, as_of).
        api_candidates: workload, bucket, api, input_len and output_len [prompt and output
            tokens per request], tokens_per_request [their sum], usd_per_request [USD]: buckets
            an API may serve within the workload's SLOs.
    Today's fleet and its changes (``current_fleet.py``, ``lead_times.py``,
    ``fleet_changes.py``; empty tables and None = a plan from an empty fleet): existing: gpu,
    pricing_type (``committed`` | ``owned``), config ('' when not known), provider, gpus
    [GPUs], end_month [first month without them; NaN = beyond the horizon], usd_per_month
    [USD/month: sunk fee or running cost]; lead_times: gpu, pricing_type ('*' = every new
    pricing type), start_month [first month new GPUs can be had], max_new_gpus_per_month
    [GPUs; NaN = no cap]; max_changes_per_month [GPUs bought + released + moved per month];
    min_committed_gpus [GPUs held at committed, owned, reserved or purchase pricing].
    config_fixed_usd_per_month [USD per configuration and month it runs in; None or 0 = none;
    ``config_fixed_cost.py``].
    """

    workloads: pd.DataFrame
    periods: pd.DataFrame
    demand: pd.DataFrame
    configs: pd.DataFrame
    candidates: pd.DataFrame
    offers: pd.DataFrame
    gpus: pd.DataFrame
    target_utilization: float = 1.0
    hours_per_month: float = HOURS_PER_MONTH
    horizon_months: float = 12.0
    budget_usd_per_month: float | None = None
    spot_max_share: float | None = None
    max_configs_per_workload: int | None = None
    one_quant_per_model: bool = False
    notes: list[str] = field(default_factory=list)
    cvar_alpha: float = 0.9
    cvar_weight: float = 0.0
    sites: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["site", "kw", "pue"]))
    site_gpus: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["site", "gpu", "pricing_type", "kw_per_gpu"]))
    apis: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["api", "max_requests_per_min", "max_tokens_per_min"]))
    api_candidates: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["workload", "bucket", "api", "input_len", "output_len", "tokens_per_request",
                 "usd_per_request"]))
    existing: pd.DataFrame = field(default_factory=pd.DataFrame)
    lead_times: pd.DataFrame = field(default_factory=pd.DataFrame)
    max_changes_per_month: float | None = None
    min_committed_gpus: float | None = None
    config_fixed_usd_per_month: float | None = None

    @property
    def horizon_hours(self) -> float:
        """Hours in the planning horizon [h]."""
        return float(self.periods["hours"].sum())

    def with_changes(self, **changes) -> Problem:
        """A copy with some fields replaced (used for what-if re-solves)."""
        return replace(self, **changes)


def charged_months(horizon_months, term_months):
    """Months a reserved commitment is paid for: the whole terms that cover the horizon
    [months], ``ceil(horizon / term) * term``.

    A commitment is bought for its whole term (and bought again when the horizon runs past
    it), so a 3-month plan that reserves for 3 years pays 36 months.

    >>> charged_months(np.array([3, 12, 13]), np.array([36, 12, 12])).tolist()
    [36, 12, 24]
    """
    return np.ceil(np.asarray(horizon_months) / term_months - 1e-9).astype(int) * term_months


def start_months(problem: Problem, keys: pd.DataFrame) -> np.ndarray:
    """First month new GPUs of each (gpu, pricing_type) row of ``keys`` can be had (0 without
    a lead time; GPUs the company has are there from the start): ``problem.lead_times``, a
    pricing type's own row before the GPU's ``*`` row."""
    lead = problem.lead_times
    if lead.empty or keys.empty:
        return np.zeros(len(keys), dtype=int)
    every = lead[lead["pricing_type"] == "*"].set_index("gpu")["start_month"]
    own = lead[lead["pricing_type"] != "*"].set_index(["gpu", "pricing_type"])["start_month"]
    start = own.reindex(pd.MultiIndex.from_frame(keys[["gpu", "pricing_type"]])).to_numpy(float)
    start = np.where(np.isnan(start), keys["gpu"].map(every).to_numpy(float), start)
    new = ~keys["pricing_type"].isin(EXISTING_PRICING).to_numpy()
    return np.where(new & ~np.isnan(start), start, 0.0).astype(int)


def term_charge_factors(problem: Problem, keys: pd.DataFrame) -> np.ndarray:
    """Per (gpu, pricing_type) row of ``keys``: USD charged per GPU-hour of the horizon over
    the listed price [1], ``charged_months(covered, term) / covered`` for a reserved term, with
    ``covered`` the horizon's months from the offer's start month; 1 for every other pricing.

    A reserved commitment's whole charged term is spread over the hours it covers, so a 3-year
    term on an 18-month horizon costs twice its listed price per GPU-hour.
    """
    terms = keys["pricing_type"].map(RESERVED_TERM_MONTHS)
    reserved = terms.notna().to_numpy()
    factor = np.ones(len(terms))
    covered = np.maximum(problem.horizon_months - start_months(problem, keys), 1.0)
    factor[reserved] = charged_months(covered[reserved],
                                      terms[reserved].to_numpy()) / covered[reserved]
    return factor


def charged_offers(problem: Problem) -> pd.DataFrame:
    """Offers with ``usd_per_gpu_hour`` per hour of the horizon: the listed price times its
    :func:`term_charge_factors` (the catalog price when the term fits)."""
    factor = term_charge_factors(problem, problem.offers)
    return problem.offers.assign(usd_per_gpu_hour=problem.offers["usd_per_gpu_hour"] * factor)


def with_routes(candidates: pd.DataFrame) -> pd.DataFrame:
    """Candidates with ``route`` and ``stages`` filled (a configuration is its own route)."""
    candidates = candidates.copy()
    if "route" not in candidates:
        candidates["route"] = candidates["config"]
    if "stages" not in candidates:
        candidates["stages"] = 1
    return candidates


def configs_of(candidates: pd.DataFrame) -> pd.DataFrame:
    """The configurations a candidate table names: config, pool, gpu, tp (and model, quant,
    stage when given), one row each."""
    columns = [c for c in ("config", "pool", "gpu", "tp", "model", "quant", "stage")
               if c in candidates]
    return candidates[columns].drop_duplicates("config").reset_index(drop=True)


def complete_routes(candidates: pd.DataFrame, configs: pd.Series | None = None) -> pd.DataFrame:
    """Usable candidate rows whose route has all its stages usable (and in ``configs``).

    A disaggregated route needs both its prefill and its decode configuration: one alone serves
    nothing, so a route missing a stage (pruned, or unable to meet an SLO) is dropped whole.
    """
    usable = candidates["req_s_per_replica"] > 0
    if configs is not None:
        usable &= candidates["config"].isin(configs)
    usable_rows = candidates[usable]
    if "stages" not in usable_rows or (usable_rows["stages"] == 1).all():  # colocated only
        return with_routes(usable_rows)
    count = usable_rows.groupby(["workload", "bucket", "route"])["config"].transform("size")
    return usable_rows[count == usable_rows["stages"]]


def flat_periods(hours_per_month: float = HOURS_PER_MONTH, horizon_months: float = 12.0) -> pd.DataFrame:
    """One period standing for the whole horizon (demand constant in time)."""
    return pd.DataFrame({"period": [0], "month": [0], "hour": [-1],
                         "hours": [hours_per_month * horizon_months],
                         "month_weight": [horizon_months]})


def profile_periods(n_hours: int, n_months: int, hours_per_month: float,
                    horizon_months: float) -> pd.DataFrame:
    """Periods (month x hour of day): ``n_months`` distinct months of ``n_hours`` periods each.

    Each hour of a representative day stands for hours_per_month / n_hours hours of its month;
    with ``n_months == 1`` the month stands for the whole horizon.
    """
    month_weight = horizon_months if n_months == 1 else 1.0
    month, hour = np.divmod(np.arange(n_months * n_hours), n_hours)
    hour = hour if n_hours > 1 else np.full_like(hour, -1)
    return pd.DataFrame({
        "period": np.arange(n_months * n_hours), "month": month, "hour": hour,
        "hours": hours_per_month / n_hours * month_weight, "month_weight": month_weight,
    })


def table_problem(capacity_req_s: np.ndarray, usd_per_gpu_hour: np.ndarray,
                  demand_req_s: np.ndarray, *, target_utilization: float = 1.0,
                  tp: np.ndarray | None = None, pricing_type: str = "on_demand",
                  **scalars) -> Problem:
    """A one-workload, one-period problem from arrays (the shape of Mélange's formulation).

    capacity_req_s[c, b]: requests/s one replica of configuration c serves for bucket b (0 =
    cannot); usd_per_gpu_hour[c]; demand_req_s[b]; configuration c runs on its own GPU type
    ``gpu{c}`` with tp[c] GPUs per replica (default 1).

    >>> p = table_problem(np.array([[2.0], [20.0]]), np.array([1.0, 3.0]), np.array([4.0]))
    >>> list(p.configs["config"])
    ['c0', 'c1']
    """
    capacity_req_s = np.atleast_2d(np.asarray(capacity_req_s, dtype=float))
    n_configs, n_buckets = capacity_req_s.shape
    tp = np.ones(n_configs, dtype=int) if tp is None else np.asarray(tp, dtype=int)
    configs = pd.DataFrame({"config": [f"c{i}" for i in range(n_configs)], "pool": "pool",
                            "gpu": [f"gpu{i}" for i in range(n_configs)], "tp": tp})
    candidates = pd.DataFrame({
        "workload": "w", "bucket": np.tile(np.arange(n_buckets), n_configs),
        "config": np.repeat(configs["config"].to_numpy(), n_buckets),
        "req_s_per_replica": capacity_req_s.ravel(),
    })
    horizon = scalars.pop("horizon_months", 1.0)
    hours = scalars.pop("hours_per_month", 1.0)
    return Problem(
        workloads=pd.DataFrame({"workload": ["w"], "pool": ["pool"], "redundancy_k": [0]}),
        periods=flat_periods(hours, horizon),
        demand=pd.DataFrame({"workload": "w", "bucket": np.arange(n_buckets), "period": 0,
                             "req_s": np.asarray(demand_req_s, dtype=float)}),
        configs=configs, candidates=candidates,
        offers=pd.DataFrame({"gpu": configs["gpu"], "pricing_type": pricing_type,
                             "usd_per_gpu_hour": np.asarray(usd_per_gpu_hour, dtype=float),
                             "max_gpus": math.nan}),
        gpus=pd.DataFrame({"gpu": configs["gpu"], "gpus_per_node": 1, "max_gpus": math.nan}),
        target_utilization=target_utilization, hours_per_month=hours, horizon_months=horizon,
        **scalars,
    )


def month_keys(periods: pd.DataFrame) -> list[str]:
    """Columns naming one month of one outcome: ``scenario`` and ``month`` when the periods
    carry demand scenarios (``stochastic_problem.py``), else ``month``."""
    return ["scenario", "month"] if "scenario" in periods else ["month"]


def outcome_keys(table: pd.DataFrame) -> list[str]:
    """``["scenario"]`` when ``table``'s rows belong to demand scenarios, else none: the month
    keys (:func:`month_keys`) less the month."""
    return month_keys(table)[:-1]


def with_month_keys(table: pd.DataFrame, periods: pd.DataFrame) -> pd.DataFrame:
    """``table`` (with a ``period`` column) with the month keys of its periods
    (:func:`month_keys`: the month, and the scenario with demand scenarios)."""
    by_period = periods.set_index("period")
    return table.assign(**{key: table["period"].map(by_period[key])
                           for key in month_keys(periods)})


def month_named(row: dict) -> str:
    """``month m``, and ``of scenario s`` when the row names one (a row of a table keyed by
    :func:`month_keys`)."""
    scenario = f" of scenario {row['scenario']}" if "scenario" in row else ""
    return f"month {row['month']:.0f}{scenario}"


def period_probability(periods: pd.DataFrame) -> pd.Series:
    """Each period's probability (1 without demand scenarios), indexed by period."""
    probability = periods["probability"] if "probability" in periods else 1.0
    return pd.Series(probability, index=periods.index).set_axis(periods["period"])
