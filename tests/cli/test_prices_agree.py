"""One price rule in every command: a user's quote wins in compare and plan alike, and estimate,
sweep, compare and plan give the same $/1M tokens for the same configuration and rule."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
import yaml

from fleetplan.catalogs import load_catalogs, unpriced_gpus
from fleetplan.cli import main
from fleetplan.sweeps.rent_or_buy import compare

CONFIG = ["--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--quant", "fp8", "--input-len", "1000",
          "--output-len", "250"]
SLOS = ["--tpot-slo-ms", "40", "--ttft-slo-ms", "1500"]


def run(capsys, *args) -> str:
    code = main(list(args))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


@pytest.fixture
def quote(tmp_path):
    """A negotiated H100 price dearer than the cheapest public one ($2.95 at Nebius)."""
    path = tmp_path / "my_prices.csv"
    path.write_text("gpu,provider,region,pricing_type,usd_per_gpu_hour,instance,includes_host,source,as_of\n"
                    "h100-sxm,acme,any,on_demand,3.20,8x H100 SXM,true,acme quote 2026-11,2026-11-01\n")
    return path


def _scenario(tmp_path, demand_req_s: float, rule: str) -> str:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({
        "name": "agree", "what_if": {"enabled": False},
        "workloads": [{"name": "chat", "model": "llama-3.1-8b", "requests_per_s": demand_req_s, "input_tokens": 1000,
                       "output_tokens": 250, "tpot_slo_ms": 40, "ttft_slo_ms": 1500, "quants": ["fp8"]}],
        "fleet": {"gpus": ["h100-sxm"], "tp": [1], "target_utilization": 1.0, "price_rule": rule}}))
    return str(path)


def test_compare_and_plan_both_use_the_users_quote(tmp_path, capsys, quote):
    run(capsys, "compare", "--model", "llama-3.1-8b", "--quant", "fp8", "--gpus", "h100-sxm,l40s",
        "--demand-req-s", "20", *SLOS, "--catalog", str(quote), "-o", str(tmp_path / "compare.json"))
    compared = pd.read_json(tmp_path / "compare.json").set_index("gpu")
    assert compared.loc["h100-sxm", "price_on_demand_usd_per_gpu_hour"] == 3.20
    assert compared.loc["h100-sxm", "price_on_demand_provider"] == "acme any"
    assert compared.loc["l40s", "price_on_demand_usd_per_gpu_hour"] < 3.20  # other GPUs keep public prices
    run(capsys, "plan", _scenario(tmp_path, 20.0, "cheapest"), "--catalog", str(quote), "-o",
        str(tmp_path / "plan.json"), "-q")
    prices = pd.DataFrame(json.loads((tmp_path / "plan.json").read_text())["tables"]["prices"])
    row = prices.set_index(["gpu", "pricing_type"]).loc[("h100-sxm", "on_demand")]
    assert (row["usd_per_gpu_hour"], row["provider"], row["origin"]) == (3.20, "acme", "your file")
    estimated = json.loads(run(capsys, "estimate", *CONFIG, "--batch", "8", "--json", "--catalog", str(quote)))[0]
    assert estimated["usd_per_hour"] == 3.20 and estimated["price_provider"] == "acme any"


@pytest.mark.parametrize("rule", ["cheapest", "median"])
def test_every_command_gives_the_same_cost_per_token(tmp_path, capsys, rule):
    at_batch = json.loads(run(capsys, "estimate", *CONFIG, "--batch", "64", "--json", "--price-rule", rule))[0]
    grid = pd.read_csv(io.StringIO(run(capsys, "sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--quant",
                                       "fp8", "--context", str(at_batch["context_len"]), "--input-len", "1000",
                                       "--output-len", "250", "--batch", "64", "--price-rule", rule)))
    assert grid["usd_per_m_output_tokens"].iloc[0] == pytest.approx(at_batch["usd_per_m_output_tokens"], rel=1e-9)
    assert grid["price_provider"].iloc[0] == at_batch["price_provider"]

    loaded = json.loads(run(capsys, "estimate", *CONFIG, "--max-rate", *SLOS, "--json", "--price-rule", rule))[0]
    demand = 2 * loaded["rate_req_s"]  # two replicas exactly full
    run(capsys, "compare", "--model", "llama-3.1-8b", "--quant", "fp8", "--gpus", "h100-sxm", "--input-len", "1000",
        "--output-len", "250", "--demand-req-s", repr(demand), *SLOS, "--utilization", "1", "--price-rule", rule,
        "-o", str(tmp_path / "compare.json"))
    compared = pd.read_json(tmp_path / "compare.json").iloc[0]
    assert compared["usd_per_m_output_tokens_on_demand"] == pytest.approx(loaded["usd_per_m_output_tokens"], rel=1e-9)
    run(capsys, "plan", _scenario(tmp_path, demand, rule), "-o", str(tmp_path / "plan.json"), "-q")
    workloads = json.loads((tmp_path / "plan.json").read_text())["tables"]["workloads"]
    assert workloads[0]["usd_per_m_tokens"] == pytest.approx(loaded["usd_per_m_total_tokens"], rel=1e-9)
    assert (rule == "median") == (loaded["usd_per_hour"] > 3.0)  # the rules price the same GPU differently


@pytest.fixture(scope="module")
def unpriced_gpu() -> str:
    """A GPU of the shipped catalogs that no on-demand price row lists (mi250x, gaudi3, ...)."""
    catalogs = load_catalogs()
    gpus = list(catalogs.gpus.index)
    missing = unpriced_gpus(catalogs.chosen_prices(gpus, ["on_demand"]), gpus)
    assert missing, "every GPU is priced now: these tests need a GPU without a price row"
    return missing[0]


def test_a_gpu_without_a_price_is_named_not_passed_off_as_given(capsys, unpriced_gpu):
    out = run(capsys, "estimate", "--gpu", unpriced_gpu, "--model", "llama-3.1-8b", "--batch", "8")
    assert f"Price: none listed for {unpriced_gpu}" in " ".join(out.split())
    code = main(["sweep", "--gpu", f"{unpriced_gpu},h100-sxm", "--model", "llama-3.1-8b", "--batch", "8"])
    captured = capsys.readouterr()
    assert code == 0
    assert f"warning: no on_demand price for {unpriced_gpu} in the catalogs" in captured.err
    rows = pd.read_csv(io.StringIO(captured.out)).set_index("gpu")
    assert rows.loc[unpriced_gpu, "price_provider"] == "none"
    assert pd.isna(rows.loc[unpriced_gpu, "usd_per_hour"])
    assert rows.loc["h100-sxm", "price_provider"] not in ("none", "given")


def test_compare_says_a_gpu_has_no_price_and_no_break_even(capsys, unpriced_gpu):
    code = main(["compare", "--model", "llama-3.1-8b", "--gpus", f"{unpriced_gpu},h100-sxm", "--demand-req-s", "2"])
    out = " ".join(capsys.readouterr().out.split())
    assert code == 0 and f"No price is listed for {unpriced_gpu}" in out and "$nan" not in out
    table = compare({"model": "llama-3.1-8b", "quant": "bf16", "input_len": 1024, "output_len": 256,
                     "demand_req_s": 2.0}, [unpriced_gpu], load_catalogs())
    assert table["break_even_months_vs_on_demand"].isna().all()
