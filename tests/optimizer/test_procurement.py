"""Rent-or-buy comparison: figures checked by hand on a small case, and bad input."""

import numpy as np
import pandas as pd
import pytest

from fleetplan.cli import main
from fleetplan.errors import InvalidValueError, UnknownNameError
from fleetplan.sweeps.rent_or_buy import HOURS_PER_MONTH, compare, rent_prices

WORKLOAD = {"model": "llama-3.1-8b", "quant": "fp8", "input_len": 512, "output_len": 256, "tpot_slo_ms": 30.0,
            "ttft_slo_ms": 500.0, "demand_req_s": 40.0}


@pytest.fixture(scope="module")
def table(shipped):
    return compare(WORKLOAD, ["h100-sxm", "b200"], shipped, utilization=0.8, usd_per_kwh=0.1, pue=1.5,
                   power_load=0.5)


def test_sizing_and_costs_by_hand(table, shipped):
    row = table.set_index("gpu").loc["h100-sxm"]
    replicas = np.ceil(40.0 / (row["capacity_req_s"] * 0.8))
    assert row["replicas"] == replicas and row["gpus_needed"] == replicas * row["tp"]
    assert row["nodes"] == np.ceil(row["gpus_needed"] / 8)
    on_demand = shipped.prices.query("gpu == 'h100-sxm' and pricing_type == 'on_demand'")["usd_per_gpu_hour"].min()
    assert row["rent_on_demand_usd_per_month"] == pytest.approx(row["gpus_needed"] * on_demand * HOURS_PER_MONTH)
    server = shipped.ownership.set_index("gpu").loc["h100-sxm"]
    power = row["nodes"] * server["node_power_kw"] * 0.5 * 1.5 * HOURS_PER_MONTH * 0.1
    opex = power + row["nodes"] * server["hosting_usd_per_node_month"]
    assert row["buy_opex_usd_per_month"] == pytest.approx(opex)
    assert row["buy_usd_per_month"] == pytest.approx(row["nodes"] * server["usd_per_node"] / 60 + opex)
    assert row["tco_3y_buy_usd"] == pytest.approx(row["nodes"] * server["usd_per_node"] + 36 * opex)
    assert row["tco_1y_on_demand_usd"] == pytest.approx(12 * row["rent_on_demand_usd_per_month"])
    saving = row["rent_on_demand_usd_per_month"] - opex
    months = row["nodes"] * server["usd_per_node"] / saving if saving > 0 else np.inf
    assert row["break_even_months_vs_on_demand"] == pytest.approx(months)
    tokens = 40.0 * 256 * HOURS_PER_MONTH * 3600
    assert row["usd_per_m_output_tokens_on_demand"] == pytest.approx(row["rent_on_demand_usd_per_month"] / tokens * 1e6)


def test_capacity_meets_the_slos(table):
    from fleetplan.sweeps import estimate_cases

    row = table.set_index("gpu").loc["b200"]
    check = estimate_cases(pd.DataFrame([{**{k: v for k, v in WORKLOAD.items() if k != "demand_req_s"},
                                          "gpu": "b200", "tp": int(row["tp"]),
                                          "rate_req_s": row["capacity_req_s"], "mode": "rate"}]))
    assert check["tpot_ms"].iloc[0] <= 30.0 + 1e-6 and check["ttft_ms"].iloc[0] <= 500.0 + 1e-6


def test_more_demand_never_needs_fewer_gpus(shipped):
    small = compare({**WORKLOAD, "demand_req_s": 10.0}, ["h100-sxm"], shipped)
    large = compare({**WORKLOAD, "demand_req_s": 100.0}, ["h100-sxm"], shipped)
    assert large["gpus_needed"].iloc[0] >= small["gpus_needed"].iloc[0]
    assert large["tco_3y_buy_usd"].iloc[0] >= small["tco_3y_buy_usd"].iloc[0]


def test_rent_prices_keep_their_source(shipped):
    cheapest = rent_prices(shipped, ["h100-sxm"])
    row = cheapest.loc[("h100-sxm", "on_demand")]
    assert row["usd_per_gpu_hour"] == shipped.prices.query(
        "gpu == 'h100-sxm' and pricing_type == 'on_demand'")["usd_per_gpu_hour"].min()
    assert row["source"]


@pytest.mark.parametrize(("change", "error", "match"), [
    ({"demand_req_s": 0.0}, InvalidValueError, "demand_req_s must be > 0, got 0"),
    ({"tpot_slo_ms": 0.5}, InvalidValueError, "no GPU option can serve this workload"),
])
def test_bad_workloads(shipped, change, error, match):
    with pytest.raises(error, match=match):
        compare({**WORKLOAD, **change}, ["h100-sxm"], shipped)


def test_bad_options(shipped):
    with pytest.raises(InvalidValueError, match="utilization must be > 0 and <= 1, got 1.5"):
        compare(WORKLOAD, ["h100-sxm"], shipped, utilization=1.5)
    with pytest.raises(UnknownNameError, match="unknown gpu 'h300'"):
        compare(WORKLOAD, ["h300"], shipped)


def test_cli(tmp_path, capsys):
    out = tmp_path / "compare.csv"
    code = main(["compare", "--model", "llama-3.1-8b", "--quant", "fp8", "--gpus", "h100-sxm,b200",
                 "--demand-req-s", "40", "--tpot-slo-ms", "30", "-o", str(out)])
    assert code == 0 and "break-even" in capsys.readouterr().out
    assert list(pd.read_csv(out)["gpu"]) == ["h100-sxm", "b200"]
    assert main(["compare", "--model", "llama-3.1-8b", "--gpus", "h100-sxm", "--demand-req-s", "4", "-o",
                 str(tmp_path / "x.txt")]) == 2
