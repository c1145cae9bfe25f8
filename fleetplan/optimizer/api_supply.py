r"""Hosted APIs in the fleet MILP: routing shares, their cost, and the rate-limit family.

For every bucket :math:`(w, b)` an API :math:`a` may serve (``Problem.api_candidates``) and
every period :math:`t` with demand, a continuous share :math:`z_{wbta} \in [0, 1]` joins the
bucket's demand row (:math:`\sum_c x_{wbct} + \sum_a z_{wbta} + u_{wbt} = 1`) and costs
:math:`3600\, d_{wbt}\, h_t\, u_{wba}` USD per unit (``hosted_apis.api_usd``). Its rate limits
hold in every period, on the period's mean rate:

.. math::

    \sum_{wb} 60\, d_{wbt}\, z_{wbta} \le R_a, \qquad
    \sum_{wb} 60\, d_{wbt}\, n_{wb}\, z_{wbta} \le T_a \quad \forall a, t

with :math:`R_a` requests and :math:`T_a` tokens (prompt + output, :math:`n_{wb}` per
request) per minute. Both kinds are one family (unit ``per_min``). A rate limit on the mean of an hour lets bursts within the hour through: the
plan assumes the provider queues or the client retries them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from fleetplan.catalogs.conventions import SECONDS_PER_HOUR
from fleetplan.optimizer.cost_pools import to_calendar_months
from fleetplan.optimizer.hosted_apis import api_usd
from fleetplan.optimizer.milp_tables import add_keyed_rows

if TYPE_CHECKING:
    from fleetplan.optimizer.fleet_problem import Problem
    from fleetplan.optimizer.milp import FleetModel
    from fleetplan.optimizer.plan_checks import PlanView

#: Kinds of rate limit: Problem.apis column and what one request counts.
RATE_LIMITS = {"max_requests_per_min": "requests", "max_tokens_per_min": "tokens"}

#: Columns of the plan's per-period API routing and monthly API usage tables.
ROUTING_COLUMNS = ["workload", "bucket", "period", "api", "fraction", "req_s", "input_len",
                   "output_len", "tokens_per_request", "usd_per_request"]
USAGE_COLUMNS = ["workload", "api", "month", "requests", "tokens", "usd", "share"]

#: Shares below this are solver noise.
EPSILON = 1e-7


def api_shares(model: FleetModel) -> pd.DataFrame:
    """The model's API share columns (empty table without APIs)."""
    return model.extras.get("api_shares", pd.DataFrame(columns=[
        "workload", "bucket", "period", "api", "req_s", "usd", "col"]))


def define_api_shares(model: FleetModel) -> None:
    """Share z of each bucket sent to each API that may serve it, per period with demand."""
    p = model.problem
    if p.api_candidates.empty:
        return
    demand = p.demand[p.demand["req_s"] > 0][["workload", "bucket", "period", "req_s"]]
    shares = p.api_candidates[["workload", "bucket", "api", "input_len", "output_len",
                               "tokens_per_request", "usd_per_request"]].merge(
        demand, on=["workload", "bucket"])
    hours = shares["period"].map(p.periods.set_index("period")["hours"])
    shares["usd"] = api_usd(shares["req_s"], hours, shares["usd_per_request"])
    model.extras["api_shares"] = model.new_columns(shares, upper=1.0)


def api_pools(problem: Problem) -> set:
    """Pools with a workload an API may serve (their replicas may be none at all)."""
    served = set(problem.api_candidates["workload"])
    return set(problem.workloads.loc[problem.workloads["workload"].isin(served), "pool"])


def _limited(problem: Problem, shares: pd.DataFrame, column: str) -> pd.DataFrame:
    limits = problem.apis.set_index("api")[column].astype(float)
    shares = shares.assign(limit=shares["api"].map(limits))
    return shares[shares["limit"].notna()]


def define_api_rate(model: FleetModel) -> None:
    """Requests and tokens per minute sent to each API stay within its rate limits."""
    shares = api_shares(model)
    if shares.empty:
        return
    for column, counted in RATE_LIMITS.items():
        rows = _limited(model.problem, shares, column)
        per_request = rows["tokens_per_request"] if counted == "tokens" else 1.0
        terms = rows[["api", "period", "col"]].assign(
            coef=np.asarray(60.0 * rows["req_s"] * per_request, dtype=float))
        limits = rows.drop_duplicates("api").set_index("api")["limit"]
        add_keyed_rows(model, "api_rate", terms, ["api", "period"], "<=",
                       lambda t, limits=limits: t["api"].map(limits).to_numpy(float),
                       unit="per_min", subject=lambda t, c=counted: t["api"] + f" ({c})")


def rate_use(problem: Problem, routing: pd.DataFrame) -> pd.DataFrame:
    """api, period, kind, per_min (requests or tokens per minute sent), limit."""
    if routing.empty:
        return pd.DataFrame(columns=["api", "period", "kind", "per_min", "limit"])
    parts = []
    for column, counted in RATE_LIMITS.items():
        per_request = routing["tokens_per_request"] if counted == "tokens" else 1.0
        rate = (60.0 * routing["req_s"] * per_request).groupby(
            [routing["api"], routing["period"]]).sum().rename("per_min").reset_index()
        rate["limit"] = rate["api"].map(problem.apis.set_index("api")[column].astype(float))
        parts.append(rate.assign(kind=counted))
    return pd.concat(parts, ignore_index=True)


def check_api_rate(view: PlanView) -> list[str]:
    """Requests and tokens per minute sent to each API stay within its rate limits, and only
    buckets the API may serve are sent to it."""
    routing = view.api_routing
    if routing.empty:
        return []
    allowed = view.problem.api_candidates.set_index(["workload", "bucket", "api"]).index
    keys = pd.MultiIndex.from_frame(routing[["workload", "bucket", "api"]])
    problems = [f"api_rate: {w} bucket {b} sent to {a}, which may not serve it"
                for w, b, a in keys[~keys.isin(allowed)]]
    use = rate_use(view.problem, routing)
    over = use[use["per_min"] > use["limit"].fillna(np.inf) * (1 + 1e-7) + 1e-6]
    return problems + [f"api_rate: {a} in period {t}: {r:,.1f} {k}/min > {lim:,.1f}"
                       for a, t, k, r, lim in over[["api", "period", "kind", "per_min",
                                                    "limit"]].to_numpy()]


def relax_api_rate(problem: Problem, api: str) -> tuple[Problem, str, str]:
    """The API's rate limits 10 % higher."""
    api = api.split(" (")[0]  # subjects name the limit: "api (requests)"
    apis = problem.apis.copy()
    row = apis["api"] == api
    for column in RATE_LIMITS:
        apis.loc[row, column] = apis.loc[row, column].astype(float) * 1.1
    return (problem.with_changes(apis=apis), "+10 %",
            f"a 10 % higher rate limit at {api} would save {{saving}} per month")


def lift_api_rate(problem: Problem) -> Problem | None:
    """No rate limits."""
    apis = problem.apis
    if apis.empty or not apis[list(RATE_LIMITS)].notna().to_numpy().any():
        return None
    return problem.with_changes(apis=apis.assign(**{c: math.nan for c in RATE_LIMITS}))


def diagnose_api_rate(problem: Problem, solution: dict) -> list[str]:
    """APIs whose rate limit the plan without limits exceeds."""
    use = rate_use(problem, solution.get("api_routing", pd.DataFrame()))
    use = use[use["limit"].notna()]
    peak = use.groupby(["api", "kind"]).agg(per_min=("per_min", "max"), limit=("limit", "first"))
    return [f"needs {r:,.0f} {kind}/min from {api} but its rate limit is {lim:,.0f}"
            for (api, kind), r, lim in zip(peak.index, peak["per_min"], peak["limit"])
            if r > lim + 1e-6]


def api_routing_table(model: FleetModel, values: np.ndarray) -> pd.DataFrame:
    """Per (workload, bucket, period, api) the share sent and its request rate."""
    shares = api_shares(model)
    if shares.empty:
        return pd.DataFrame(columns=ROUTING_COLUMNS)
    shares = shares.assign(fraction=np.where(np.abs(values) < EPSILON, 0.0, values))
    shares = shares[shares["fraction"] > EPSILON]
    shares = shares.assign(req_s=shares["fraction"] * shares["req_s"])
    return shares[ROUTING_COLUMNS].sort_values(["workload", "bucket", "period", "api"]) \
        .reset_index(drop=True)


def api_costs_by_period(routing: pd.DataFrame, periods: pd.DataFrame) -> pd.DataFrame:
    """workload, api, period, requests, tokens, usd of the API routing over each period."""
    hours = routing["period"].map(periods.set_index("period")["hours"])
    requests = routing["req_s"] * hours * SECONDS_PER_HOUR
    return pd.DataFrame({
        "workload": routing["workload"], "api": routing["api"], "period": routing["period"],
        "requests": requests, "tokens": requests * routing["tokens_per_request"],
        "usd": api_usd(routing["req_s"], hours, routing["usd_per_request"])})


def api_usage_table(problem: Problem, routing: pd.DataFrame) -> pd.DataFrame:
    """Per workload, API and month of the horizon: requests, tokens and usd sent to the API,
    and its share of the workload's requests that month."""
    if routing.empty:
        return pd.DataFrame(columns=USAGE_COLUMNS)
    periods = problem.periods
    amounts = ["requests", "tokens", "usd"]
    costs = to_calendar_months(api_costs_by_period(routing, periods), periods, amounts)
    table = costs.groupby(["workload", "api", "month"], as_index=False)[amounts].sum()
    hours = problem.demand["period"].map(periods.set_index("period")["hours"])
    demand = to_calendar_months(problem.demand.assign(
        requests=problem.demand["req_s"] * hours * SECONDS_PER_HOUR), periods, ["requests"])
    total = demand.groupby(["workload", "month"])["requests"].sum()
    table["share"] = table["requests"] / total.reindex(
        pd.MultiIndex.from_frame(table[["workload", "month"]])).to_numpy()
    return table[USAGE_COLUMNS].sort_values(["workload", "api", "month"]).reset_index(drop=True)


def plan_api_costs(plan) -> pd.DataFrame:
    """workload, api, period, requests, tokens, usd sent to hosted APIs by a finished plan
    (every period of the plan, merged ones spread back)."""
    routing = getattr(plan, "api_routing", pd.DataFrame())
    if routing.empty or plan.periods.empty:
        return pd.DataFrame(columns=["workload", "api", "period", "requests", "tokens", "usd"])
    return api_costs_by_period(routing, plan.periods)
