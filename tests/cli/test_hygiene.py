"""Command-line conventions: --version, exit codes, modes said out loud, one number style with
units in headers, readable catalog tables, and the README's promises."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

import fleetplan
from fleetplan.cli import main
from fleetplan.cli.plan import parse_date
from fleetplan.cli.plan_summary import print_plan
from fleetplan.cli.tables import exact_text, number_text
from fleetplan.errors import InvalidValueError
from fleetplan.optimizer.fleet_plan import FleetPlan


def run(capsys, *args):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_version(capsys):
    assert run(capsys, "--version") == (0, f"fleetplan {fleetplan.__version__}\n", "")


def test_an_estimate_that_cannot_run_exits_2_unless_allowed(capsys):
    args = ["estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-70b", "--tp", "3", "--offline"]
    code, out, err = run(capsys, *args)
    assert code == 2 and out == ""
    assert err == ("error: this configuration cannot run: tp 3 does not divide 64 attention heads "
                   "(--allow-invalid prints its figures anyway)\n")
    code, out, err = run(capsys, *args, "--allow-invalid")
    assert code == 0 and "warning: this configuration cannot run" in err and "reason" in out


def test_estimate_says_its_mode(capsys):
    code, out, err = run(capsys, "estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b")
    assert code == 0 and "note: no mode given, so offline" in err
    assert "mode offline: the memory-limited maximum throughput" in out
    code, out, err = run(capsys, "estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--batch", "8")
    assert code == 0 and "mode batch" in out and "note" not in err


def test_estimate_table_has_one_number_style_units_and_its_price(capsys):
    code, out, _ = run(capsys, "estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-70b", "--tp", "4",
                       "--quant", "fp8", "--offline")
    assert code == 0
    assert not re.search(r"\d\.\d+e[+-]\d", out)  # no scientific notation
    rows = {line.split("│")[1].strip(): line.split("│")[2:4] for line in out.splitlines() if line.count("│") >= 4}
    assert re.fullmatch(r"\d{1,3}(,\d{3})+", rows["decode_tok_s"][0].strip())  # thousands separators
    assert rows["tpot_ms"][1].strip() == "ms" and rows["usd_per_m_output_tokens"][1].strip() == "USD/1M tokens"
    assert "Price: $2.95 per GPU-hour on demand from nebius eu-north1, as of 2026-11-22" in " ".join(out.split())


@pytest.mark.parametrize(("value", "text"), [(6.0, "6"), (10712.34, "10,712"), (23.456, "23.5"), (2.949, "2.95"),
                                             (0.01783, "0.0178"), (1.2e-7, "0.000000120"), (float("nan"), "-"),
                                             (float("inf"), "infinite"), (True, "yes")])
def test_number_text(value, text):
    assert number_text(value) == text


def test_exact_text_keeps_every_decimal_without_exponents():
    assert [exact_text(v) for v in (15.3994, 3_000_000.0, 0.515625, 1e-5)] == ["15.3994", "3,000,000", "0.515625",
                                                                                 "0.00001"]


def test_compare_table_is_plain_and_explains_reserved_prices(capsys):
    code, out, err = run(capsys, "compare", "--model", "llama-3.1-8b", "--quant", "fp8", "--gpus", "h100-sxm,l4",
                         "--demand-req-s", "40", "--tpot-slo-ms", "40")
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 100
    assert "USD/month" in out and "break-even" in out and not re.search(r"\de[+-]\d", out)
    assert "h100-sxm: aws reserves h100-sxm at 1-year $5.42 (21% below aws on-demand $6.88)" in " ".join(out.split())
    assert "warning: h100-sxm reserved_1y $5.42/GPU-hour from aws us-east-1: price is" in err


def test_catalog_show_filters_by_gpu_and_fits_100_columns(capsys):
    code, out, _ = run(capsys, "catalog", "show", "prices", "--gpu", "H100-SXM", "--format", "table")
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert code == 0 and rows and all(line.split("│")[1].strip() == "h100-sxm" for line in rows)
    for name in ("gpus", "models", "quants", "prices", "efficiency", "ownership"):
        code, out, _ = run(capsys, "catalog", name, "--format", "table")
        assert code == 0 and max(len(line) for line in out.splitlines()) <= 100, name
    code, out, _ = run(capsys, "catalog", "show", "gpus", "--gpu", "l4", "--columns", "id,memory_gb", "--format", "csv")
    assert out == "id,memory_gb\nl4,24.0\n"
    assert run(capsys, "catalog", "show", "models", "--gpu", "l4")[0] == 2


def test_the_example_points_to_commands_that_exist(capsys):
    _, example, _ = run(capsys, "example")
    for command in re.findall(r"`fleetplan ([a-z ]+)`", example):
        assert run(capsys, *command.split(), "--help")[0] == 0, command


@pytest.mark.parametrize(("command", "unit"), [("sweep", "Context lengths [tokens]"),
                                             ("compare", "Peak demand [requests/s]"),
                                             ("plan", "whole command [s], from its start")])
def test_help_texts_keep_their_units_in_brackets(capsys, command, unit):
    """Help is rendered as Markdown, not Rich markup, which would take ``[tokens]`` for a style
    tag and drop it."""
    code, out, _ = run(capsys, *command.split(), "--help")
    assert code == 0 and unit in " ".join(re.sub(r"[│ ]+", " ", out).split())


def test_bulk_estimates_number_their_cases(tmp_path, capsys):
    cases = tmp_path / "cases.csv"
    pd.DataFrame({"gpu": ["h100-sxm", "l4"], "model": "llama-3.1-8b", "quant": "bf16", "tp": 1, "input_len": 512,
                  "output_len": 128, "batch": 8}).to_csv(cases, index=False)
    code, _, _ = run(capsys, "estimate", "--cases", str(cases), "-o", str(tmp_path / "out.csv"))
    out = pd.read_csv(tmp_path / "out.csv")
    assert code == 0 and list(out["id"]) == [1, 2] and list(out.columns[:2]) == ["id", "gpu"]
    assert {"price_provider", "price_as_of", "price_source"} <= set(out.columns)


def test_latency_percentiles_carry_vllm_names(capsys):
    code, out, _ = run(capsys, "estimate", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--rate", "4", "--json")
    record = json.loads(out)[0]
    assert code == 0 and record["p99_ttft_ms"] >= record["p90_ttft_ms"] and "p99_tpot_ms" in record
    assert not {"ttft_p99_ms", "tpot_p99_ms"} & set(record)


def test_plan_summary_prints_whole_replicas(tmp_path, capsys):
    small = Path(__file__).parents[1] / "optimizer" / "fixtures" / "small_scenario.yaml"
    code, out, _ = run(capsys, "plan", str(small), "-o", str(tmp_path / "plan.json"))
    fleet = [line for line in out.splitlines() if "/bf16/" in line]
    assert code == 0 and fleet
    assert not [line for line in fleet if re.search(r"│\s+\d+\.00\s+│", line)]  # "6", never "6.00"
    assert all(re.search(r"│ (nebius|runpod|lambda|aws|gcp|coreweave) ", line) for line in fleet)  # the price's origin


def test_bad_start_date():
    with pytest.raises(InvalidValueError, match="--start-date must be a date such as 2027-01-01, got 'soon'"):
        parse_date("soon")


@pytest.mark.parametrize(("args", "message"), [
    (["plan", "--start-date", "2027-13-01"], "--start-date must be a date such as 2027-01-01"),
    (["estimate", "--gpu", "l4", "--model", "llama-3.1-8b", "--price-rule", "cheap"],
     "unknown price rule 'cheap'; did you mean 'cheapest'"),
    (["compare", "--model", "llama-3.1-8b", "--gpus", "l4", "--demand-req-s", "1", "--max-price-age-days", "-1"],
     "max price age must be a whole number of days >= 0, got -1"),
    (["plan", "--max-price-age-days", "-5"], "max price age must be a whole number of days >= 0, got -5"),
    (["catalog", "show", "quants", "--gpu", "l4"], "--gpu filters gpus, prices, efficiency and ownership, not quants"),
])
def test_bad_options_exit_2_with_one_line(capsys, args, message):
    code, _, err = run(capsys, *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_the_scenario_start_date_is_month_zero_of_every_output(tmp_path):
    # fleet.start_date dates today's fleet's end dates; the workbook and the FOCUS CSV count
    # their months from it too, unless --start-date moves both
    small = Path(__file__).parents[1] / "optimizer" / "fixtures" / "small_scenario.yaml"
    scenario = tmp_path / "dated.yaml"
    scenario.write_text(small.read_text().replace("fleet:\n", "fleet:\n  start_date: 2027-01-01\n"))
    assert main(["plan", str(scenario), "-q", "-o", str(tmp_path / "p.json"),
                 "--focus", str(tmp_path / "a.csv")]) == 0
    starts = pd.read_csv(tmp_path / "a.csv")["BillingPeriodStart"]
    assert starts.min().startswith("2027-01-01")
    assert main(["plan", str(scenario), "-q", "-o", str(tmp_path / "q.json"), "--start-date",
                 "2027-03-01", "--focus", str(tmp_path / "b.csv")]) == 0
    assert pd.read_csv(tmp_path / "b.csv")["BillingPeriodStart"].min().startswith("2027-03-01")
    plan = json.loads((tmp_path / "q.json").read_text())
    assert plan["scenario"]["fleet"]["start_date"] == "2027-03-01"


def test_a_plan_without_a_solution_says_what_to_do(capsys):
    plan = FleetPlan(status="no_solution", gap=math.nan, objective_usd=math.nan,
                     usd_per_month=math.nan, solver="HiGHS", solve_seconds=5.0,
                     assumptions={"horizon_months": 1})
    print_plan(plan)
    out = capsys.readouterr().out
    assert "the solver found no plan within the time limit: give it more time (--time-limit" in out
    assert "cost: none (no plan)\n" in out and "$-" not in out
