"""What-if grids: expansion, scenario variants, infeasible and failing cases, resume, Dask, CLI."""

import concurrent.futures
import json
import os
import queue
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from fleetplan.cli import main
from fleetplan.errors import ScenarioError
from fleetplan.exports.whatif_cache import run_grid
from fleetplan.optimizer import whatif_solving
from fleetplan.optimizer.scenario_files import validate_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario
from fleetplan.optimizer.whatif_grid import (
    Grid,
    apply_case,
    case_id,
    check_capped_gpus,
    expand,
    load_grid,
    scaled_catalogs,
    summary_row,
)
from fleetplan.optimizer.whatif_solving import solve_case
from fleetplan.optimizer.whatif_variants import group_chunks

SMALL = Path(__file__).parent / "fixtures" / "small_scenario.yaml"


def grid_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "grid.yaml"
    path.write_text(f"base: {SMALL}\n" + body)
    return path


@pytest.fixture
def small_grid(tmp_path):
    return load_grid(grid_file(tmp_path, "axes:\n  demand_multiplier: [1, 3]\n  tpot_slo_ms: [50, 1]\n"))


def test_expand_product_and_cases(tmp_path):
    grid, _ = load_grid(grid_file(tmp_path, "axes:\n  demand_multiplier: [1, 2]\n  price_multiplier: {l40s: [0.5, 1]}\n"
                                            "  pricing: {od: [on_demand], mixed: [on_demand, spot]}\n"))
    cases = expand(grid)
    assert len(cases) == 8
    assert list(cases[0]) == ["demand_multiplier", "price_multiplier[l40s]", "pricing"]
    named, _ = load_grid(grid_file(tmp_path, "cases:\n  - {name: double, demand_multiplier: 2}\n"))
    assert expand(named) == [{"name": "double", "demand_multiplier": 2}]


def test_apply_case_changes_the_scenario(small_grid, shipped):
    grid, base = small_grid
    data, multipliers = apply_case(base, {"demand_multiplier": 3, "tpot_slo_ms": 40}, grid)
    assert data["workloads"][0]["requests_per_s"] == 60 and data["workloads"][0]["tpot_slo_ms"] == 40
    assert base["workloads"][0]["requests_per_s"] == 20  # the base is not modified
    cheaper = scaled_catalogs(shipped, {"l40s": 0.5})
    before = shipped.prices.query("gpu == 'l40s'")["usd_per_gpu_hour"].to_numpy()
    assert (cheaper.prices.query("gpu == 'l40s'")["usd_per_gpu_hour"].to_numpy() == before * 0.5).all()
    by_provider = scaled_catalogs(shipped, {"provider:aws": 2.0})
    aws = shipped.prices["provider"] == "aws"
    assert (by_provider.prices.loc[aws, "usd_per_gpu_hour"] == shipped.prices.loc[aws, "usd_per_gpu_hour"] * 2).all()
    assert (by_provider.prices.loc[~aws, "usd_per_gpu_hour"] == shipped.prices.loc[~aws, "usd_per_gpu_hour"]).all()
    allowed = Grid(base="x", axes={"allowed_gpus": {"one": ["l40s"]}})
    assert apply_case(base, {"allowed_gpus": "one"}, allowed)[0]["fleet"]["gpus"] == ["l40s"]
    with pytest.raises(ScenarioError, match="names gpu 'b200', which the base scenario's fleet does not allow"):
        apply_case(base, {"max_gpus[b200]": 8}, grid)
    with pytest.raises(ScenarioError, match="unknown what-if axis 'context'"):
        apply_case(base, {"context": 8}, grid)


def test_run_grid_reports_infeasible_cases_and_more_demand_costs_more(small_grid, tmp_path):
    grid, base = small_grid
    results = run_grid(grid, base, expand(grid), tmp_path / "cases").set_index(["demand_multiplier", "tpot_slo_ms"])
    assert results.loc[(1, 50), "status"] == "optimal"
    assert results.loc[(3, 50), "usd_per_month"] >= results.loc[(1, 50), "usd_per_month"]
    assert results.loc[(1, 1), "status"] == "infeasible"
    assert "TPOT SLO 1 ms is below the best achievable" in results.loc[(1, 1), "message"]


def test_a_failing_case_is_a_row_not_an_abort(small_grid, tmp_path):
    grid, base = small_grid
    results = run_grid(grid, base, [{"demand_multiplier": 1}, {"demand_multiplier": -1}], tmp_path / "c")
    assert list(results["status"]) == ["optimal", "error"]
    assert "requests_per_s" in results["message"].iloc[1]


def test_resume_skips_solved_cases(small_grid, tmp_path):
    grid, base = small_grid
    cases = [{"demand_multiplier": 1}, {"demand_multiplier": 2}]
    folder = tmp_path / "cases"
    run_grid(grid, base, cases[:1], folder)
    cached = folder / f"{case_id(cases[0])}.json"
    entry = json.loads(cached.read_text())
    entry["row"]["usd_per_month"] = 123.0  # a marker only a skipped case keeps
    cached.write_text(json.dumps(entry))
    seen = []
    results = run_grid(grid, base, cases, folder, progress=lambda done, total: seen.append((done, total)))
    assert results["usd_per_month"].iloc[0] == 123.0
    assert seen == [(2, 2)]  # only the second case was solved


@pytest.mark.slow
def test_dask_results_equal_local_results(small_grid, tmp_path):
    distributed = pytest.importorskip("distributed")
    grid, base = small_grid
    cases = expand(grid)
    local = run_grid(grid, base, cases, tmp_path / "local")
    with distributed.LocalCluster(n_workers=2, processes=False, dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        remote = run_grid(grid, base, cases, tmp_path / "dask", client=client)
    columns = ["case_id", "status", "usd_per_month", "gpus_peak", "message"]
    pd.testing.assert_frame_equal(local[columns], remote[columns])


def test_cli_writes_workbook_and_parquet(tmp_path, capsys):
    grid = grid_file(tmp_path, "axes:\n  demand_multiplier: [1, 2]\n")
    assert main(["whatif", str(grid), "-o", str(tmp_path / "grid.xlsx"), "--workers", "1"]) == 0
    sheets = pd.read_excel(tmp_path / "grid.xlsx", sheet_name=None)
    assert {"Scenarios", "By demand_multiplier", "Base plan fleet", "Read me"} <= set(sheets)
    assert len(sheets["Scenarios"]) == 2 and (tmp_path / "grid-base.xlsx").is_file()
    assert main(["whatif", str(grid), "-o", str(tmp_path / "grid.parquet"), "--workers", "1", "--no-base-plan"]) == 0
    table = pd.read_parquet(tmp_path / "grid.parquet" / "scenarios.parquet")
    assert list(table["demand_multiplier"]) == [1, 2]
    assert "2 scenarios, 0 infeasible or failed" in capsys.readouterr().err


@pytest.mark.parametrize(("body", "match"), [
    ("axes:\n  demand_multiplier: [1]\ncases:\n  - {demand_multiplier: 2}\n", "give either axes or cases"),
    ("axes:\n  demand_multipler: [1]\n", "demand_multipler"),
    ("axes:\n  pricing: {}\n", "axes.pricing: must hold at least 1 entry, got {}"),
    ("axes:\n  pricing: {rent: []}\n", "axes.pricing.rent: must hold at least 1 value, got []"),
    ("axes:\n  price_multiplier: {h100-sxm: []}\n",
     "axes.price_multiplier.h100-sxm: must hold at least 1 value"),
    ("axes:\n  allowed_gpus: {none: []}\n", "axes.allowed_gpus.none: must hold at least 1 value"),
])
def test_bad_grid_files(tmp_path, capsys, body, match):
    assert main(["whatif", str(grid_file(tmp_path, body)), "-o", str(tmp_path / "g.xlsx")]) == 2
    assert match in capsys.readouterr().err


def test_a_cap_on_a_gpu_no_case_allows_is_refused_before_any_case_runs(tmp_path, capsys):
    grid = grid_file(tmp_path, "axes:\n  demand_multiplier: [1, 2]\n  max_gpus: {h200: [8]}\n")
    assert main(["whatif", str(grid), "-o", str(tmp_path / "g.xlsx"), "--no-base-plan"]) == 2
    err = capsys.readouterr().err
    assert (f"error: {grid}: axes.max_gpus.h200: the base scenario's fleet.gpus has no h200 "
            f"(it has ") in err
    assert not (tmp_path / "g.xlsx.cases").exists()
    allowed = grid_file(tmp_path, "axes:\n  max_gpus: {h200: [8]}\n"
                                  "  allowed_gpus: {more: [h200, l40s]}\n")
    check_capped_gpus(*load_grid(allowed))  # another axis may allow it


@pytest.mark.parametrize("suffix", [".xlsx", ".parquet", ".csv"])
def test_a_grid_whose_every_case_failed_is_still_written(tmp_path, capsys, suffix):
    grid = grid_file(tmp_path, "axes:\n  demand_multiplier: [-1, -2]\n")
    output = tmp_path / f"g{suffix}"
    assert main(["whatif", str(grid), "-o", str(output), "--workers", "1", "--no-base-plan"]) == 0
    assert "2 scenarios, 2 infeasible or failed" in capsys.readouterr().err
    if suffix == ".xlsx":  # the workbook's headers are for people
        table = pd.read_excel(output, sheet_name="Scenarios").rename(
            columns={"Status": "status", "Cost (USD/month)": "usd_per_month"})
    else:
        table = pd.read_parquet(output / "scenarios.parquet") if suffix == ".parquet" else \
            pd.read_csv(output)
    assert list(table["status"]) == ["error", "error"] and table["usd_per_month"].isna().all()


def test_missing_grid_file(tmp_path, capsys):
    assert main(["whatif", str(tmp_path / "none.yaml"), "-o", str(tmp_path / "g.xlsx")]) == 2
    assert "does not exist" in capsys.readouterr().err


def base_gap(base: dict) -> float:
    from fleetplan.optimizer.scenario import SolverOptions

    return SolverOptions(**base.get("solver", {})).mip_gap


def test_disaggregation_and_engine_axes(tmp_path):
    body = ("axes:\n  disaggregation: {colocated: null, pairs: {prefill_gpus: [h100-sxm]}}\n"
            "  engine: ['*']\n")
    grid, base = load_grid(grid_file(tmp_path, body))
    cases = expand(grid)
    assert cases == [{"disaggregation": "colocated", "engine": "*"}, {"disaggregation": "pairs", "engine": "*"}]
    paired, _ = apply_case(base, cases[1], grid)
    assert paired["fleet"]["disaggregation"] == {"prefill_gpus": ["h100-sxm"]}
    assert paired["fleet"]["engine"] is None
    assert apply_case(base, cases[0], grid)[0]["fleet"]["disaggregation"] is None
    results = run_grid(grid, base, cases, tmp_path / "cases").set_index("disaggregation")
    assert (results["status"] == "optimal").all()
    # pairs are offered next to colocated replicas: never dearer beyond the solver's accepted gap
    assert results.loc["pairs", "usd_per_month"] <= results.loc["colocated", "usd_per_month"] * (1 + base_gap(base))
    engine, _ = apply_case(base, {"engine": "vllm"}, grid)
    assert engine["fleet"]["engine"] == "vllm"


def test_cases_that_ask_the_engine_the_same_question_share_one_estimate(tmp_path, shipped):
    # demand and price axes leave every capacity unchanged: one engine call serves them all,
    # and each row still equals planning its case directly
    grid, base = load_grid(grid_file(tmp_path, "axes:\n  demand_multiplier: [1, 2]\n"
                                               "  price_multiplier: {l40s: [0.5, 1]}\n"))
    memo = whatif_solving.EstimateMemo()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(whatif_solving, "_ESTIMATES", memo)
        rows = [solve_case(base, case, grid.model_dump_json(), []) for case in expand(grid)]
    assert memo.hits == 3 and len(memo.results) == 1
    data, multipliers = apply_case(base, expand(grid)[3], grid)
    direct = plan_scenario(validate_scenario(data), scaled_catalogs(shipped, multipliers), what_if=False)
    assert rows[3]["usd_per_month"] == pytest.approx(direct.usd_per_month, rel=1e-9)


@pytest.mark.slow
def test_worker_processes_solve_a_grid_after_this_process_has_run_the_solver(tmp_path):
    # forked children of a process that has run HiGHS 1.16 never return from it; workers start
    # from a fresh server process instead (a regression hangs, so it runs with a time limit)
    grid = grid_file(tmp_path, "axes:\n  demand_multiplier: [1, 2]\n")
    code = textwrap.dedent(f"""
        from pathlib import Path
        from fleetplan.exports.whatif_cache import run_grid
        from fleetplan.optimizer.whatif_grid import expand, load_grid
        from fleetplan.optimizer.whatif_solving import solve_case
        grid, base = load_grid(Path({str(grid)!r}))
        cases = expand(grid)
        solve_case(base, cases[0], grid.model_dump_json(), [])
        rows = run_grid(grid, base, cases, Path({str(tmp_path / "cases")!r}), workers=2)
        print(sorted(rows["status"]))
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=240, check=True)
    assert done.stdout.strip().splitlines()[-1] == "['optimal', 'optimal']"


def chunk_rows(path: Path):
    """Base, cases, grid JSON, the rows of one chunk of every case of the grid file at
    ``path``, and the cases planned in full on the way."""
    grid, base = load_grid(path)
    cases, grid_json = expand(grid), grid.model_dump_json()
    full_plans = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(whatif_solving, "solve_case",
                      lambda *args: full_plans.append(args[1]) or solve_case(*args))
        rows = list(whatif_solving.iter_chunk(base, cases, grid_json, []))
    return base, cases, grid_json, rows, full_plans


def test_variants_of_one_built_model_give_the_full_plans_rows(tmp_path):
    # demand, GPU prices and caps only: every case is a variant of the first case's model (no
    # full plan at all), including price changes that change which configurations are
    # dominated and a cap that binds, and each row equals planning the case in full
    base, cases, grid_json, rows, full_plans = chunk_rows(grid_file(
        tmp_path, "axes:\n  demand_multiplier: [0.5, 1, 2.75]\n"
                  "  price_multiplier: {l40s: [0.6, 1.5], h100-sxm: [1, 0.3]}\n"
                  "  max_gpus: {h100-sxm: [16, 1]}\n"))
    assert full_plans == []
    for row, case in zip(rows, cases, strict=True):
        full = solve_case(base, case, grid_json, [])
        assert set(row) == set(full)
        for column, value in full.items():
            if column == "solve_seconds":
                continue
            if isinstance(value, float):
                assert row[column] == pytest.approx(value, rel=1e-9, nan_ok=True), column
            else:
                assert row[column] == value, column


def test_a_case_a_variant_cannot_answer_is_planned_in_full(tmp_path):
    # a case the variants cannot take (here an invalid one: no demand) is planned in full,
    # whose row reports it
    base, cases, grid_json, rows, full_plans = chunk_rows(grid_file(
        tmp_path, "cases:\n  - {demand_multiplier: 1}\n  - {demand_multiplier: 0}\n"))
    assert full_plans == [{"demand_multiplier": 0}]
    full = solve_case(base, cases[1], grid_json, [])
    assert {k: v for k, v in rows[1].items() if k != "solve_seconds"} == \
        {k: v for k, v in full.items() if k != "solve_seconds"}


def test_cases_are_chunked_by_what_a_variant_can_change():
    cases = [{"demand_multiplier": d, "tpot_slo_ms": t, "price_multiplier[l40s]": p,
              "price_multiplier[provider:aws]": 1.0, "max_gpus[h100-sxm]": 8 * d}
             for t in (40, 50) for d in (1, 2, 3) for p in (0.5, 1.0)]
    chunks = group_chunks(cases, workers=2)
    assert [len(chunk) for chunk in chunks] == [6, 6]
    assert all(len({case["tpot_slo_ms"] for case in chunk}) == 1 for chunk in chunks)
    # one group and two workers: two chunks, so both workers have one
    assert [len(chunk) for chunk in group_chunks(cases[:6], workers=2)] == [3, 3]
    assert [len(chunk) for chunk in group_chunks(cases[:6], workers=1, most=4)] == [4, 2]
    by_provider = [dict(case, **{"price_multiplier[provider:aws]": 2.0}) for case in cases[:2]]
    assert len(group_chunks(cases[:2] + by_provider, workers=1)) == 2


def test_variants_of_the_example_with_its_cost_cover_cut_give_the_full_plans_costs(tmp_path):
    # several pools and hours: the cost-cover cut is solved again for every variant; each
    # plan is proven within the accepted gap, so the variant's and the full plan's costs are
    # within that gap of each other (the two solves start from different plans, and may stop
    # at different plans of the same problem: 1.3 x demand did, 0.35% apart)
    path = tmp_path / "grid.yaml"
    path.write_text("base: example\ncases:\n  - {demand_multiplier: 1.0}\n"
                    "  - {demand_multiplier: 1.3, \"price_multiplier[h100-sxm]\": 0.8}\n")
    base, cases, grid_json, rows, full_plans = chunk_rows(path)
    assert full_plans == []
    gap = base_gap(base)
    for row, case in zip(rows, cases, strict=True):
        full = solve_case(base, case, grid_json, [])
        assert row["status"] == full["status"] == "optimal"
        assert row["gap"] <= gap + 1e-9 and full["gap"] <= gap + 1e-9
        assert set(row) == set(full)
        for plan in (row, full):  # every request served
            assert plan["served_fraction_min"] == pytest.approx(1.0)
        for column in ("usd_per_month", "usd_per_m_tokens"):
            assert row[column] == pytest.approx(full[column], rel=gap), column


def test_a_worker_sends_each_row_as_soon_as_it_is_known(tmp_path):
    # rows travel one by one (the caller saves and counts every case), not a chunk at a time
    grid, base = load_grid(grid_file(tmp_path, "axes:\n  demand_multiplier: [1, 2]\n"))
    sent = queue.Queue()
    seen = []
    original = whatif_solving.iter_chunk

    def watched(*args):
        for row in original(*args):
            seen.append(sent.qsize())  # rows already on the queue when this one is made
            yield row
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(whatif_solving, "iter_chunk", watched)
        count = whatif_solving.send_chunk(base, expand(grid), grid.model_dump_json(), [], sent)
    assert count == 2 and seen == [0, 1]
    assert [sent.get()["demand_multiplier"] for _ in range(2)] == [1, 2]


def test_a_dead_worker_is_reported_not_waited_for(monkeypatch):
    monkeypatch.setattr(whatif_solving, "ROW_WAIT_S", 0.01)
    dead = concurrent.futures.Future()
    dead.set_exception(RuntimeError("worker died"))
    with pytest.raises(RuntimeError, match="worker died"):
        whatif_solving._next_row(queue.Queue(), [dead])


def test_a_catalog_rewritten_at_the_same_size_and_time_is_read_again(tmp_path):
    path = tmp_path / "prices.csv"
    header = ("gpu,provider,region,pricing_type,usd_per_gpu_hour,instance,includes_host,source,"
              "as_of\n")
    path.write_text(header + "h100-sxm,own,any,on_demand,4.10,8x box,false,our quote,2026-01-05\n")
    stamp = path.stat().st_mtime_ns
    first = whatif_solving._grid_catalogs((str(path),))
    path.write_text(header + "h100-sxm,own,any,on_demand,4.20,8x box,false,our quote,2026-01-05\n")
    os.utime(path, ns=(stamp, stamp))  # a file system too coarse to tell the two writes apart
    second = whatif_solving._grid_catalogs((str(path),))
    prices = [c.prices.set_index(["gpu", "provider"]).loc[("h100-sxm", "own"), "usd_per_gpu_hour"]
              for c in (first, second)]
    assert prices == [4.10, 4.20]


def test_gpu_counts_of_a_result_row_are_whole_numbers():
    # peak GPUs summed from solver values carry float noise (26.999999999999); the row does not
    peaks = pd.Series({"h100-sxm": 27.00000000000025, "l40s": 4.999999999999462})
    row = summary_row({}, status="optimal", gap=0.0, usd_per_month=1.0, tokens_per_month=None,
                      served_fraction=None, gpus_peak=peaks, solve_seconds=0.1, message="")
    assert (row["gpus_peak"], row["gpus_h100-sxm"], row["gpus_l40s"]) == (32.0, 27.0, 5.0)


def test_a_cost_of_capital_axis_prices_the_servers_a_plan_buys(tmp_path):
    """Buying is the cheapest here; at a dearer cost of capital the plan costs more, and a
    rate out of range is that case's one-line error, not the grid's."""
    base = tmp_path / "buy.yaml"
    base.write_text(SMALL.read_text().replace("pricing: [on_demand]",
                                              "pricing: [on_demand, purchase]"))
    path = tmp_path / "grid.yaml"
    path.write_text(f"base: {base}\naxes:\n  cost_of_capital: [0, 0.3, 2]\n  residual_value: [0]\n")
    grid, data = load_grid(path)
    cases = expand(grid)
    assert cases[1] == {"cost_of_capital": 0.3, "residual_value": 0}
    assert apply_case(data, cases[1], grid)[0]["fleet"]["cost_of_capital"] == 0.3
    results = run_grid(grid, data, cases, tmp_path / "cases").set_index("cost_of_capital")
    assert list(results["status"]) == ["optimal", "optimal", "error"]
    assert results.loc[0.3, "usd_per_month"] > results.loc[0.0, "usd_per_month"]
    assert "fleet.cost_of_capital: must be <= 1, got 2" in results.loc[2.0, "message"]
