"""The result of a fleet optimization: tidy tables with units in their column names.

A :class:`FleetPlan` is what ``fleetplan plan`` prints and what the exports write. Its field
names and table columns are a contract: the workbook and Parquet writers read them.

Units used in column names: ``usd`` US dollars, ``_per_month`` per month of
``assumptions["hours_per_month"]`` hours, ``_total`` over the whole planning horizon,
``req_s`` requests per second, ``tok_s`` tokens per second, ``_ms`` milliseconds, ``gpus`` GPU
count, ``fraction`` a share between 0 and 1, ``hours`` hours of the horizon.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from fleetplan.catalogs.jsonable import jsonable, jsonable_column
from fleetplan.optimizer.plan_summary import summary_text

#: Every table field of a FleetPlan, in the order exports should show them.
TABLE_FIELDS: tuple[str, ...] = (
    "fleet", "fleet_by_period", "nodes", "nodes_by_period", "routing", "workloads",
    "costs_by_gpu", "costs_by_pricing", "costs_by_workload", "costs_by_month",
    "binding_constraints", "unmet_demand", "prices", "periods", "candidates", "commitments",
    "power", "api_routing", "api_usage", "api_break_even", "changes", "config_fixed_costs",
)

#: Scalar fields written at the top of the JSON file and the workbook's summary.
SCALAR_FIELDS: tuple[str, ...] = (
    "status", "gap", "objective_usd", "usd_per_month", "solver", "solve_seconds", "bound_usd",
)

#: Plan statuses: the solver's true outcome, never assumed.
STATUSES: dict[str, str] = {
    "optimal": "proven optimal within the relative gap tolerance",
    "time_limit": "stopped by the time limit with a feasible plan; see gap",
    "infeasible": "demand cannot be fully met; plan from the elastic model, see unmet_demand",
    "no_solution": "the solver found no plan within the time limit",
}


def _empty() -> pd.DataFrame:
    return pd.DataFrame()


@dataclass
class FleetPlan:
    """The cheapest fleet found for a scenario, and why.

    Scalars:
        status: one of :data:`STATUSES` (``optimal``, ``time_limit``, ``infeasible``,
            ``no_solution``).
        gap: relative MIP gap of the returned plan [fraction; 0.001 = 0.1 %], NaN if the
            solver did not report one.
        objective_usd: total cost of the fleet over the planning horizon [USD]; elastic
            penalties for unmet demand are not included.
        usd_per_month: objective_usd / horizon months [USD/month].
        solver: solver that produced the plan (``HiGHS`` or ``PULP_CBC_CMD``).
        solve_seconds: wall-clock time of the optimization that produced the plan [s].
        bound_usd: best proven lower bound on objective_usd [USD]; gap = (objective_usd -
            bound_usd) / objective_usd. NaN when unknown (an elastic plan).
        scenario: the validated scenario as a plain dict (JSON-compatible).
        assumptions: plain dict: ``hours_per_month`` [h], ``horizon_months`` [months],
            ``horizon_hours`` [h], ``target_utilization`` [fraction],
            ``budget_usd_per_month`` [USD/month or None], ``spot_max_share`` [fraction or
            None], ``notes`` (list of str), ``dominated_configs`` (ids left out because
            another configuration is at least as good), and from a scenario
            ``catalog_versions`` (``Catalogs.versions()``), ``capacity_source`` (``engine`` |
            ``profiles``) and ``prices_used`` (the rows of the prices table).
        messages: one-line explanations (infeasibility reasons, warnings) [text].

    Tables (pandas DataFrames, one row per key listed first):
        fleet: (config, pricing_type): model, gpu, quant, tp, replicas_peak,
            replicas_mean (hour-weighted), gpus_peak, usd_per_gpu_hour, usd_per_month,
            usd_total, calibration (measured, transferred or prior efficiency rows) and
            error_p10_pct / error_p90_pct (signed error band of rows like it [%]) where the
            capacity came from the performance model. Costs are for the GPUs the replicas occupy; rounding to whole nodes
            shows as ``idle_usd_per_month`` in costs_by_gpu.
        fleet_by_period: (period, config, pricing_type): month, hour, gpu, replicas,
            gpus (= replicas x tp).
        nodes: (gpu, pricing_type): gpus_per_node, nodes_peak, gpus_bought_peak,
            gpus_used_peak, max_gpus (availability cap, NaN = none), usd_per_month.
        nodes_by_period: (period, gpu, pricing_type): month, hour, nodes and gpus bought
            in the period (reserved ones from their start month on), the GPUs the node cost
            pays for; empty in plans written before it existed.
        routing: (workload, bucket, period, config): route, input_len, output_len, fraction
            (of the bucket's demand), req_s, tpot_ms, ttft_ms, batch. The two stages of a
            disaggregated route (``<route>#prefill``, ``<route>#decode``) each carry the
            route's whole fraction.
        workloads: (workload): model, demand_req_s_mean, demand_req_s_peak,
            tokens_per_month, served_fraction, tpot_slo_ms, tpot_ms_max, ttft_slo_ms,
            ttft_ms_max, utilization (load / capacity of the replicas it uses, hour-weighted),
            usd_per_month, usd_per_m_tokens.
        costs_by_gpu: (gpu): gpus_peak, usd_per_month, idle_usd_per_month, usd_total.
        costs_by_pricing: (pricing_type): gpus_peak, usd_per_month, usd_total, share.
        costs_by_workload: (workload): usd_per_month, usd_total, share; replica costs
            split by each workload's share of the load; the rows ``(spare)`` (replicas no
            workload loads, e.g. N+k spares) and ``(idle node GPUs)`` (whole-node rounding)
            make the total equal objective_usd.
        costs_by_month: (month): usd, reserved_usd, on_demand_usd, spot_usd.
        binding_constraints: (family, subject): period, value, limit, unit, change,
            saving_usd_per_month, description. ``saving_usd_per_month`` is measured by
            re-solving with the constraint relaxed by ``change``; NaN if not re-solved.
        unmet_demand: (workload, bucket, period): demand_req_s, unmet_req_s,
            unmet_fraction, reason. Empty when every request is served.
        prices: (gpu, pricing_type): usd_per_gpu_hour, provider, region, instance,
            source, as_of, origin (``catalog`` | ``scenario``): the price row used.
        periods: (period): month, hour (-1 = the whole day), hours [h of the horizon it
            stands for], month_weight [horizon months its month stands for], solved_as (the
            period with identical demand whose solution it shares).
        candidates: (workload, bucket, config): the capacity table the model used:
            model, gpu, quant, tp, input_len, output_len, req_s_per_replica (at 100 %
            utilization), batch, tpot_ms, ttft_ms, valid, reason.
        commitments: (option, scenario): with demand scenarios only, each commitment option
            priced with its recourse re-solved per scenario (``commitment_risk.COLUMNS``):
            status (of that re-solve), reserved_gpus, probability, usd_per_month and
            recourse_usd_per_month in that scenario, utilization of the commitment [fraction], first-stage, expected, P90,
            CVaR and cost-at-risk (P90 - expected) USD per month, over_stochastic_usd_per_month
            (expected cost above the stochastic plan's; the P50-only row's is the VSS).
    With demand scenarios, periods carry scenario and probability, hours are weighted by
    probability, and every cost is the expected cost over the scenarios.
        power: (site, month): kw_peak, kw_mean [facility kW of the GPUs bought on the site],
            kw_limit [kW], mwh [MWh in the month]. Empty without ``fleet.sites``.
        api_routing: (workload, bucket, period, api): fraction (of the bucket's demand sent
            to the hosted API), req_s, input_len, output_len [prompt and output tokens per
            request], tokens_per_request, usd_per_request.
        api_usage: (workload, api, month): requests, tokens, usd sent to the API in the
            month, share (of the workload's requests that month).
        api_break_even: (workload, api): usd_per_request (the workload's mix), config,
            pricing_type, replica_usd_per_hour, replica_req_s (one replica at the target
            utilization), break_even_req_s (request rate above which that replica is cheaper
            than the API; inf: never), break_even_tokens_per_month. Empty without
            ``fleet.apis``.
        API costs are part of objective_usd, costs_by_workload, costs_by_month (``api_usd``)
        and costs_by_pricing (pricing type ``api``).
        changes: (month, gpu, pricing_type, config): gpus_before, gpus, added, removed,
            kept [GPUs held; config ``(idle)`` = held, running nothing]: the plan as changes
            to today's fleet (``fleet_changes.py``); empty when the plan starts from nothing
            and sets no change limits. ``assumptions["stay_the_course"]`` compares it with
            keeping today's fleet and renting on demand (``stay_the_course.py``).
        config_fixed_costs: (config, month; scenario too with demand scenarios): month_weight
            [horizon months the month stands for, times the scenario's probability], deployed
            (1), usd [USD over the horizon]: the fixed monthly cost of every
            configuration in the months it runs (``config_fixed_cost.py``); empty without
            ``fleet.config_fixed_usd_per_month``. Part of objective_usd, costs_by_workload,
            costs_by_month (``config_fixed_usd``) and costs_by_pricing (``config_fixed``).
    """

    status: str
    gap: float
    objective_usd: float
    usd_per_month: float
    solver: str
    solve_seconds: float
    bound_usd: float = math.nan
    scenario: dict[str, Any] = field(default_factory=dict)
    assumptions: dict[str, Any] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    fleet: pd.DataFrame = field(default_factory=_empty)
    fleet_by_period: pd.DataFrame = field(default_factory=_empty)
    nodes_by_period: pd.DataFrame = field(default_factory=_empty)
    nodes: pd.DataFrame = field(default_factory=_empty)
    routing: pd.DataFrame = field(default_factory=_empty)
    workloads: pd.DataFrame = field(default_factory=_empty)
    costs_by_gpu: pd.DataFrame = field(default_factory=_empty)
    costs_by_pricing: pd.DataFrame = field(default_factory=_empty)
    costs_by_workload: pd.DataFrame = field(default_factory=_empty)
    costs_by_month: pd.DataFrame = field(default_factory=_empty)
    binding_constraints: pd.DataFrame = field(default_factory=_empty)
    unmet_demand: pd.DataFrame = field(default_factory=_empty)
    prices: pd.DataFrame = field(default_factory=_empty)
    periods: pd.DataFrame = field(default_factory=_empty)
    candidates: pd.DataFrame = field(default_factory=_empty)
    commitments: pd.DataFrame = field(default_factory=_empty)
    power: pd.DataFrame = field(default_factory=_empty)
    api_routing: pd.DataFrame = field(default_factory=_empty)
    api_usage: pd.DataFrame = field(default_factory=_empty)
    api_break_even: pd.DataFrame = field(default_factory=_empty)
    changes: pd.DataFrame = field(default_factory=_empty)
    config_fixed_costs: pd.DataFrame = field(default_factory=_empty)
    #: With demand scenarios, the plan's own commitment priced from its own solution
    #: (``commitment_risk.option_rows``, status ``plan``): what ``add_commitments`` falls back on
    #: when re-solving that option finds no recourse in time. Not exported.
    own_option: pd.DataFrame = field(default_factory=_empty, repr=False, compare=False)
    #: Seconds the plan's own model took to build [s] (``FleetModel.build_s``): how long a
    #: follow-up's model of the same problem will take (``build_model``'s ``expected_s``).
    #: Not exported.
    model_build_s: float = field(default=0.0, repr=False, compare=False)

    @property
    def feasible(self) -> bool:
        """True when every request of every period is served."""
        return self.status in ("optimal", "time_limit")

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table field by name, in :data:`TABLE_FIELDS` order."""
        return {name: getattr(self, name) for name in TABLE_FIELDS}

    def scalars(self) -> dict[str, Any]:
        """Scalar fields, plus scenario, assumptions and messages, JSON-compatible."""
        values = {name: jsonable(getattr(self, name)) for name in SCALAR_FIELDS}
        values.update(scenario=jsonable(self.scenario), assumptions=jsonable(self.assumptions),
                      messages=list(self.messages))
        return values

    def to_dict(self) -> dict[str, Any]:
        """The whole plan as JSON-compatible data (tables as lists of records)."""
        data = self.scalars()
        data["tables"] = {name: _records(table) for name, table in self.tables().items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FleetPlan:
        """A plan from :meth:`to_dict` data (tables come back as DataFrames)."""
        data = dict(data)
        tables = {name: _numbers_restored(pd.DataFrame.from_records(rows))
                  for name, rows in data.pop("tables").items()}
        # a missing figure (NaN) is written as null: a plan without a solution has no cost
        numbers = ("gap", "objective_usd", "usd_per_month", "solve_seconds", "bound_usd")
        scalars = {k: (math.nan if v is None and k in numbers else v) for k, v in data.items()}
        stay = (scalars.get("assumptions") or {}).get("stay_the_course")
        if isinstance(stay, dict):  # its USD figures, NaN when today's fleet cannot serve
            missing = [k for k, v in stay.items()
                       if v is None and k.endswith(("_usd_total", "_usd_per_month"))]
            stay.update(dict.fromkeys(missing, math.nan))
        return cls(**scalars, **tables)

    def summary_text(self, max_rows: int = 12) -> str:
        """A plain-text summary for the terminal."""
        return summary_text(self, max_rows=max_rows)


def _numbers_restored(table: pd.DataFrame) -> pd.DataFrame:
    """Number columns read back from JSON: a missing number (NaN) is written as null, and a
    column of nulls only (say, the costs of commitment options none of which was priced in
    time) reads back as objects, which arithmetic refuses. A column whose values are all
    missing or all numbers is made floats again.

    >>> table = pd.DataFrame.from_records([{"usd": None, "gpu": "l4"}, {"usd": None, "gpu": "a"}])
    >>> _numbers_restored(table)["usd"].dtype, table["gpu"].tolist()
    (dtype('float64'), ['l4', 'a'])
    """
    for name in table.columns[table.dtypes == object]:
        present = table[name].dropna()
        if present.map(type).isin([int, float]).all():
            table[name] = table[name].astype(float)
    return table


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """``table`` as JSON-compatible records, converted column by column (``jsonable``'s rules):
    a 36,000-row routing table took 0.8 s value by value."""
    if table.empty:
        return []
    names = [str(name) for name in table.columns]
    columns = [jsonable_column(table[name]) for name in table.columns]
    return [dict(zip(names, values)) for values in zip(*columns)]
