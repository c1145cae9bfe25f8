"""The supply example (a 400 kW hall, a hosted API) through ``fleetplan plan``: kW per month and
the API share printed, the Parquet ``power``, ``api_usage`` and ``api_break_even`` tables read
by DuckDB and Polars, API cost in the chargeback and the FOCUS CSV to the cent, and a Supply
sheet only when the scenario has sites or APIs."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pytest

import fleetplan
from fleetplan.cli import main
from fleetplan.exports.plan_workbook import plan_sheets

EXAMPLE = Path(fleetplan.__file__).parent / "examples" / "supply.yaml"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    folder = tmp_path_factory.mktemp("supply")
    focus = folder / "charges.csv"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["plan", str(EXAMPLE), "-o", str(folder / "plan.parquet"), "--focus",
                     str(focus), "--no-what-if", "--start-date", "2027-01-01"])
    return code, out.getvalue(), folder / "plan.parquet", focus


@pytest.mark.slow
def test_plan_prints_kw_per_month_and_the_api_share(written):
    code, out, _, _ = written
    assert code == 0
    power = out[out.index("Power"):out.index("Hosted APIs")]
    assert power.count("hall-a") == 12 and "│   400 │" in power  # each month, its limit
    apis = out[out.index("Hosted APIs"):]
    assert "summaries" in apis and "together-8b" in apis and "break-even" in apis


@pytest.mark.slow
def test_parquet_power_and_api_tables_read_back(written):
    _, _, folder, _ = written
    power = duckdb.sql(f"SELECT * FROM read_parquet('{folder}/power.parquet')").df()
    assert set(power["month"]) == set(range(12)) and set(power["site"]) == {"hall-a"}
    assert (power["kw_peak"] <= power["kw_limit"] + 1e-6).all()
    assert power["kw_peak"].max() > 300  # the reserved base fills the hall
    assert power["mwh"].iloc[0] == pytest.approx(power["kw_mean"].iloc[0] * 730 / 1000)
    usage = pl.read_parquet(folder / "api_usage.parquet")
    assert set(usage["workload"]) == {"summaries"}  # the assistant's SLOs rule the API out
    assert 0 < usage["share"].max() < 1  # the API takes the quiet hours, replicas the bursts
    break_even = pl.read_parquet(folder / "api_break_even.parquet")
    assert break_even["break_even_req_s"][0] > 0


@pytest.mark.slow
def test_api_cost_is_charged_and_billed_to_the_cent(written):
    _, _, folder, focus = written
    objective = duckdb.sql(
        f"SELECT objective_usd FROM read_parquet('{folder}/summary.parquet')").fetchall()[0][0]
    api_usd = duckdb.sql(
        f"SELECT sum(usd) FROM read_parquet('{folder}/api_usage.parquet')").fetchall()[0][0]
    charges = duckdb.sql(f"SELECT usd FROM read_parquet('{folder}/chargeback.parquet')").df()
    assert round(charges["usd"].sum() * 100) == round(objective * 100)
    table = pd.read_csv(focus)
    assert round(table["BilledCost"].sum() * 100) == round(objective * 100)
    api_rows = table[table["ResourceType"] == "Hosted model API"]
    assert len(api_rows) == 12 and set(api_rows["PricingUnit"]) == {"1M Tokens"}
    assert api_rows["BilledCost"].sum() == pytest.approx(api_usd, abs=0.02)


def test_supply_sheet_only_with_sites_or_apis():
    from fleetplan.optimizer.fleet_plan import FleetPlan

    plain = FleetPlan("optimal", 0.0, 1.0, 1.0, "HiGHS", 0.1, scenario={"fleet": {}})
    assert "Supply" not in plan_sheets(plain)
    with_site = FleetPlan("optimal", 0.0, 1.0, 1.0, "HiGHS", 0.1,
                          scenario={"fleet": {"sites": [{"name": "hall", "kw": 400}]}})
    assert "Supply" in plan_sheets(with_site)


def test_an_unknown_api_model_exits_2_with_one_line(tmp_path, capsys):
    text = EXAMPLE.read_text().replace("model: llama-3.1-8b\n      usd_per_1m",
                                       "model: lama-3.1-8b\n      usd_per_1m")
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(text)
    code = main(["plan", str(scenario), "-o", str(tmp_path / "plan.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert any("fleet.apis[0].model: unknown model 'lama-3.1-8b'; did you mean" in line
               for line in err)
