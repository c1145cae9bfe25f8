"""Power envelopes and hosted APIs against brute force on tiny instances: (c) the envelope holds
in every month, (d) an API takes load exactly when it is cheaper than the marginal replica."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fleetplan.optimizer.constraint_families import verify_plan
from fleetplan.optimizer.hosted_apis import break_even_table
from fleetplan.optimizer.optimization import WhatIfOptions, optimize_problem
from fleetplan.optimizer.solver import SolveOptions
from tests.optimizer.instances import make_problem

EXACT = SolveOptions(time_limit_s=20, mip_gap=0.0)
SETTINGS = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KW_PER_GPU = {"g0": 1.0, "g1": 0.7}
#: The pricing type of the GPUs on the site in these tables: any flexible one will do (``owned``
#: GPUs are only those ``fleet.current`` says exist, so a bare ``owned`` offer holds none).
ON_SITE = "spot"


def sited(problem, kw: float, pue: float = 1.0, pricing: str = ON_SITE):
    """``problem`` with one site of ``kw`` holding every GPU at ``pricing``."""
    gpus = problem.offers.loc[problem.offers["pricing_type"] == pricing, "gpu"]
    return problem.with_changes(
        sites=pd.DataFrame({"site": ["hall"], "kw": [kw], "pue": [pue]}),
        site_gpus=pd.DataFrame({"site": "hall", "gpu": gpus.to_numpy(), "pricing_type": pricing,
                                "kw_per_gpu": gpus.map(KW_PER_GPU).to_numpy()}))


def with_api(problem, usd_per_request: float, max_requests_per_min: float = math.nan):
    """``problem`` with one API that may serve every bucket of workload ``w``."""
    buckets = problem.demand["bucket"].unique()
    return problem.with_changes(
        apis=pd.DataFrame({"api": ["api"], "max_requests_per_min": [max_requests_per_min],
                           "max_tokens_per_min": [math.nan]}),
        api_candidates=pd.DataFrame({"workload": "w", "bucket": buckets, "api": "api",
                                     "input_len": 800.0, "output_len": 200.0,
                                     "tokens_per_request": 1000.0,
                                     "usd_per_request": usd_per_request}))


def power_brute_force(capacity, demand, tp, kw, hours, owned, on_demand) -> float:
    """Cheapest plan by enumerating owned (on the site) and on-demand (off it) replicas of each
    configuration in each period; one bucket."""
    total = 0.0
    for t, need in enumerate(demand):
        best = math.inf
        for counts in itertools.product(range(5), repeat=2 * len(capacity)):
            mine, rented = np.array(counts[:len(capacity)]), np.array(counts[len(capacity):])
            draw = sum(mine[c] * tp[c] * KW_PER_GPU[f"g{c}"] for c in range(len(capacity)))
            served = float(np.dot(mine + rented, capacity))
            if draw > kw + 1e-9 or served < need - 1e-9:
                continue
            best = min(best, float(np.dot(mine * tp, owned) + np.dot(rented * tp, on_demand)))
        total += best * hours[t]
    return total


@st.composite
def power_instances(draw):
    n = draw(st.integers(1, 2))
    capacity = draw(st.lists(st.sampled_from([2.0, 3.0, 5.0]), min_size=n, max_size=n))
    demand = draw(st.lists(st.sampled_from([0.0, 2.0, 4.5, 7.0]), min_size=1, max_size=2))
    tp = draw(st.lists(st.sampled_from([1, 2]), min_size=n, max_size=n))
    owned = draw(st.lists(st.sampled_from([0.5, 1.0]), min_size=n, max_size=n))
    on_demand = draw(st.lists(st.sampled_from([1.5, 3.0]), min_size=n, max_size=n))
    kw = draw(st.sampled_from([0.0, 1.4, 2.0, 3.5]))
    return capacity, demand, tp, owned, on_demand, kw


@pytest.mark.slow
@SETTINGS
@given(power_instances())
@example(([2.0, 5.0], [7.0, 2.0], [1, 2], [0.5, 1.0], [3.0, 3.0], 2.0))
def test_power_envelope_matches_brute_force_and_holds_every_month(instance):
    capacity, demand, tp, owned, on_demand, kw = instance
    offers = {**{(f"g{c}", ON_SITE): owned[c] for c in range(len(capacity))},
              **{(f"g{c}", "on_demand"): on_demand[c] for c in range(len(capacity))}}
    hours = [1.0 + t for t in range(len(demand))]
    problem = make_problem(np.array([capacity]).T, np.array([demand]).T, offers, tp=tp,
                           hours=hours, horizon_months=1.0)
    problem = sited(problem, kw)
    problem.periods["month"] = problem.periods["period"]  # each period its own month
    plan = optimize_problem(problem, EXACT)
    expected = power_brute_force(capacity, demand, tp, kw, hours, owned, on_demand)
    assert plan.status == "optimal"
    assert plan.objective_usd == pytest.approx(expected, rel=1e-6, abs=1e-6)
    assert (plan.power["kw_peak"] <= plan.power["kw_limit"] + 1e-6).all()
    assert len(plan.power) == len(demand)  # one row per site and month
    assert verify_plan(plan, problem) == []


def test_power_check_names_the_site_and_the_kw():
    problem = sited(make_problem([[5.0]], [[9.0]], {("g0", ON_SITE): 1.0}), kw=10.0)
    plan = optimize_problem(problem, EXACT)
    tight = problem.with_changes(sites=problem.sites.assign(kw=1.0))
    assert verify_plan(plan, tight) == ["power: site hall in period 0: 2.0 kW > 1.0 kW"]


def test_power_envelope_with_pue_counts_facility_power():
    problem = sited(make_problem([[5.0]], [[9.0]], {("g0", ON_SITE): 1.0,
                                                     ("g0", "on_demand"): 4.0}), 2.5, pue=1.5)
    plan = optimize_problem(problem, EXACT)
    # 2 owned GPUs draw 3.0 facility kW > 2.5: one owned and one rented
    assert plan.objective_usd == pytest.approx(5.0)
    assert set(plan.power["kw_peak"]) == {1.5}


def test_power_marginal_value_and_diagnosis():
    problem = sited(make_problem([[5.0]], [[9.0]], {("g0", ON_SITE): 1.0,
                                                     ("g0", "on_demand"): 4.0},
                                 horizon_months=1.0), kw=1.0)
    plan = optimize_problem(problem, EXACT, WhatIfOptions(enabled=True))
    row = plan.binding_constraints.set_index("family").loc["power"]
    assert row["saving_usd_per_month"] == pytest.approx(3.0)
    assert "100 kW more at site hall would save $3.00 per month" in row["description"]
    owned_only = sited(make_problem([[5.0]], [[9.0]], {("g0", ON_SITE): 1.0}), kw=1.0)
    short = optimize_problem(owned_only, EXACT)
    assert short.status == "infeasible"
    assert "site hall needs 2 kW but its envelope is 1 kW (1 kW short)" in " ".join(short.messages)


def api_brute_force(capacity, demand, price, hours, u, rpm) -> list[tuple[float, float]]:
    """Per period: the cheapest cost without the API and with some load on it, over replica
    counts, the API taking what the replicas leave."""
    periods = []
    for t, need in enumerate(demand):
        without, using = math.inf, math.inf
        for counts in itertools.product(range(6), repeat=len(capacity)):
            rest = need - min(need, float(np.dot(counts, capacity)))
            if rest * 60.0 > rpm + 1e-9:
                continue
            cost = float(np.dot(counts, price)) * hours[t] + 3600.0 * rest * hours[t] * u
            if rest > 1e-9:
                using = min(using, cost)
            else:
                without = min(without, cost)
        periods.append((without, using))
    return periods


@st.composite
def api_instances(draw):
    n = draw(st.integers(1, 2))
    capacity = draw(st.lists(st.sampled_from([2.0, 3.0, 5.0]), min_size=n, max_size=n))
    price = draw(st.lists(st.sampled_from([1.0, 2.0]), min_size=n, max_size=n))
    demand = draw(st.lists(st.sampled_from([0.5, 2.5, 6.0, 9.0]), min_size=1, max_size=2))
    u = draw(st.sampled_from([1e-5, 7e-5, 2e-4, 1e-3]))
    rpm = draw(st.sampled_from([math.inf, 30.0, 120.0]))
    return capacity, price, demand, u, rpm


@pytest.mark.slow
@SETTINGS
@given(api_instances())
@example(([5.0], [2.0], [6.0], 1e-4, math.inf))
@example(([2.0], [1.0], [0.5, 2.5], 1e-05, math.inf))  # the LP sends everything to the API
def test_api_share_matches_brute_force(instance):
    capacity, price, demand, u, rpm = instance
    hours = [1.0 + t for t in range(len(demand))]
    problem = make_problem(np.array([capacity]).T, np.array([demand]).T,
                           {(f"g{c}", "on_demand"): p for c, p in enumerate(price)},
                           hours=hours, horizon_months=1.0)
    problem = with_api(problem, u, rpm if math.isfinite(rpm) else math.nan)
    plan = optimize_problem(problem, EXACT)
    periods = api_brute_force(capacity, demand, price, hours, u, rpm)
    assert plan.objective_usd == pytest.approx(sum(min(p) for p in periods), rel=1e-6, abs=1e-6)
    assert plan.costs_by_workload["usd_total"].sum() == pytest.approx(plan.objective_usd)
    assert plan.costs_by_month["usd"].sum() == pytest.approx(plan.usd_per_month)
    assert verify_plan(plan, problem) == []
    sent = plan.api_routing.groupby("period")["fraction"].sum() if not plan.api_routing.empty \
        else pd.Series(dtype=float)
    for t, (without, using) in enumerate(periods):  # chosen exactly when strictly cheaper
        if using < without - 1e-6:
            assert sent.get(t, 0.0) > 1e-6, t
        elif without < using - 1e-6:
            assert sent.get(t, 0.0) == 0.0, t


@pytest.mark.parametrize(("u", "api_req_s"), [(3e-5, 7.0), (1e-4, 2.0), (1.5e-4, 0.0)])
def test_api_chosen_exactly_below_the_marginal_replica_cost(u, api_req_s):
    # 7 req/s on 5 req/s replicas at $1/h. The API charges 3600 u per request/s-hour: at 3e-5
    # ($0.108) it is below a full replica's $0.2 per request/s-hour and takes everything; at
    # 1e-4 the 2 req/s a first replica leaves cost $0.72 < the marginal replica's $1; at
    # 1.5e-4 they cost $1.08 > $1, so a second replica wins
    problem = with_api(make_problem([[5.0]], [[7.0]], {("g0", "on_demand"): 1.0},
                                    horizon_months=1.0), u)
    plan = optimize_problem(problem, EXACT)
    sent = float(plan.api_routing["req_s"].sum()) if not plan.api_routing.empty else 0.0
    assert sent == pytest.approx(api_req_s)
    replicas = math.ceil((7.0 - api_req_s) / 5.0 - 1e-9)
    assert plan.objective_usd == pytest.approx(replicas + 3600 * api_req_s * u)
    if api_req_s:
        assert plan.api_usage["usd"].sum() == pytest.approx(3600 * api_req_s * u)
        assert plan.costs_by_pricing.set_index("pricing_type").loc["api", "usd_total"] == \
            pytest.approx(3600 * api_req_s * u)


def test_break_even_rate():
    problem = with_api(make_problem([[5.0]], [[7.0]], {("g0", "on_demand"): 1.0}), 1e-4)
    row = optimize_problem(problem, EXACT).api_break_even.iloc[0]
    # a $1/h replica against $1e-4 per request: 1 / (3600 x 1e-4) = 2.78 req/s <= 5 req/s
    assert row["break_even_req_s"] == pytest.approx(1 / 0.36)
    assert row["replica_req_s"] == pytest.approx(5.0)
    cheap = with_api(make_problem([[5.0]], [[7.0]], {("g0", "on_demand"): 1.0}), 1e-5)
    assert optimize_problem(cheap, EXACT).api_break_even.iloc[0]["break_even_req_s"] == math.inf
    # a free committed offer is sunk capacity, not a price to buy more at: still on-demand's
    sunk = with_api(make_problem([[5.0]], [[7.0]], {("g0", "on_demand"): 1.0,
                                                     ("g0", "committed"): 0.0}), 1e-4)
    row = break_even_table(sunk).iloc[0]
    assert (row["pricing_type"], row["break_even_req_s"]) == ("on_demand", pytest.approx(1 / 0.36))


def test_rate_limit_binds_prices_and_diagnoses():
    problem = with_api(make_problem([[5.0]], [[6.0]], {("g0", "on_demand"): 1.0},
                                    horizon_months=1.0), 1e-5, max_requests_per_min=60.0)
    plan = optimize_problem(problem, EXACT, WhatIfOptions(enabled=True))
    assert plan.api_routing["req_s"].sum() == pytest.approx(1.0)  # 60 per minute
    row = plan.binding_constraints.set_index("family").loc["api_rate"]
    assert "a 10 % higher rate limit at api would save" in row["description"]
    api_only = with_api(make_problem([[0.0]], [[7.0]], {("g0", "on_demand"): 1.0}), 1e-5,
                        max_requests_per_min=60.0)
    short = optimize_problem(api_only, EXACT)
    assert short.status == "infeasible"
    assert "needs 420 requests/min from api but its rate limit is 60" in " ".join(short.messages)
    tight = problem.with_changes(apis=problem.apis.assign(max_requests_per_min=30.0))
    assert verify_plan(plan, tight) == ["api_rate: api in period 0: 60.0 requests/min > 30.0"]


def test_power_counts_whole_nodes_idle_gpus_included():
    problem = sited(make_problem([[5.0]], [[4.0]], {("g0", ON_SITE): 1.0},
                                 gpus_per_node={"g0": 4}, horizon_months=1.0), kw=10.0)
    plan = optimize_problem(problem, EXACT)
    assert set(plan.power["kw_peak"]) == {4.0}  # one replica on one 4-GPU node of 1 kW GPUs
    tight = problem.with_changes(sites=problem.sites.assign(kw=3.5))
    assert verify_plan(plan, tight) == ["power: site hall in period 0: 4.0 kW > 3.5 kW"]
    assert optimize_problem(tight, EXACT).status == "infeasible"


def test_api_check_names_a_bucket_the_api_may_not_serve():
    problem = with_api(make_problem([[5.0]], [[7.0]], {("g0", "on_demand"): 1.0},
                                    horizon_months=1.0), 3e-5)
    plan = optimize_problem(problem, EXACT)
    barred = problem.with_changes(api_candidates=problem.api_candidates.iloc[0:0])
    assert "api_rate: w bucket 0 sent to api, which may not serve it" in verify_plan(plan, barred)


def test_reserved_first_decomposition_keeps_power_and_api_rows():
    import fleetplan.optimizer.decomposition as decomposition

    base = make_problem([[5.0]], [[2.0], [6.5], [4.0]], {("g0", "reserved_1y"): 0.6,
                                                          ("g0", "on_demand"): 1.0},
                        hours=[2.0, 1.0, 3.0], horizon_months=12.0)
    problem = with_api(sited(base, kw=1.0, pricing="reserved_1y"), 2e-5,
                       max_requests_per_min=90.0)
    whole = optimize_problem(problem, EXACT)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decomposition, "WHOLE_MODEL_COLUMNS", 0)
        split = optimize_problem(problem, EXACT)
    assert split.objective_usd == pytest.approx(whole.objective_usd, rel=1e-6)
    assert verify_plan(split, problem) == [] and verify_plan(whole, problem) == []
    assert set(split.power["kw_peak"]) == {1.0}  # one reserved GPU fills the 1 kW site
    assert split.api_routing["req_s"].max() == pytest.approx(1.5)  # 90 per minute
