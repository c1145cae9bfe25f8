"""Resumed work never reports stale answers: the what-if cache is keyed by the base scenario,
the catalogs and the fleetplan version; a damaged entry is solved again and said so; and
temporaries a killed run left behind are cleaned by the next one."""

from __future__ import annotations

import json

import pandas as pd

from tests.adversarial.conftest import temporaries


def grid_file(sandbox, requests_per_s: float):
    def edit(data):
        data["workloads"][0]["requests_per_s"] = requests_per_s
    base = sandbox.scenario("base.yaml", edit=edit)
    return sandbox.write("grid.yaml", f"base: {base.name}\naxes:\n  demand_multiplier: [1.0, 2.0]\n")


def run_grid(sandbox, grid):
    result = sandbox.run("whatif", grid, "-o", "grid.csv", "--workers", "1", "--no-base-plan")
    assert result.code == 0, result.err
    return pd.read_csv(sandbox.path("grid.csv")), result


def test_an_edited_base_scenario_is_solved_again(sandbox):
    first, _ = run_grid(sandbox, grid_file(sandbox, 2.0))
    second, _ = run_grid(sandbox, grid_file(sandbox, 20.0))
    assert (second["usd_per_month"].to_numpy() > first["usd_per_month"].to_numpy() * 3).all()


def test_edited_catalogs_are_solved_again(sandbox):
    grid = grid_file(sandbox, 2.0)
    first, _ = run_grid(sandbox, grid)
    sandbox.write("prices.csv", "gpu,provider,region,pricing_type,usd_per_gpu_hour,instance,includes_host,source,"
                                "as_of\nl40s,quote,eu,on_demand,50.0,x,false,our quote,2026-11-01\n")
    text = sandbox.path("base.yaml").read_text() + "catalogs: [prices.csv]\n"
    sandbox.write("base.yaml", text)
    second, _ = run_grid(sandbox, grid)
    assert (second["usd_per_month"].to_numpy() > first["usd_per_month"].to_numpy()).all()


def test_a_damaged_cache_entry_is_solved_again_and_reported(sandbox):
    grid = grid_file(sandbox, 2.0)
    first, _ = run_grid(sandbox, grid)
    entries = sorted(sandbox.path("grid.csv.cases").glob("*.json"))
    assert entries
    entries[0].write_text("{not json")
    again, result = run_grid(sandbox, grid)
    pd.testing.assert_series_equal(again["usd_per_month"], first["usd_per_month"])
    assert "damaged" in result.err and "solved again" in result.err
    json.loads(entries[0].read_text())  # repaired


def test_stale_temporaries_of_a_killed_run_are_removed_by_the_next(sandbox):
    sandbox.write(".grid.parquet.abc123.tmp", b"half a file")
    (sandbox.path(".grid.parquet.def456.tmp")).mkdir()
    sandbox.write(".other-tool.tmp", b"not ours")
    result = sandbox.run("sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--batch", "1-8",
                         "-o", "grid.parquet")
    assert result.code == 0, result.err
    assert temporaries(sandbox.folder) == [".other-tool.tmp"]


def test_an_edited_catalog_file_alone_is_solved_again(sandbox):
    header = "gpu,provider,region,pricing_type,usd_per_gpu_hour,instance,includes_host,source,as_of\n"
    sandbox.write("prices.csv", header + "l40s,quote,eu,on_demand,1.0,x,false,our quote,2026-11-01\n")
    base = sandbox.scenario("base.yaml", catalogs=["prices.csv"])
    grid = sandbox.write("grid.yaml", f"base: {base.name}\naxes:\n  demand_multiplier: [1.0]\n")
    first, _ = run_grid(sandbox, grid)
    sandbox.write("prices.csv", header + "l40s,quote,eu,on_demand,5.0,x,false,our quote,2026-11-01\n")
    second, _ = run_grid(sandbox, grid)
    assert second["usd_per_month"].iloc[0] > first["usd_per_month"].iloc[0] * 3
