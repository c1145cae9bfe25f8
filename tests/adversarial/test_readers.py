"""The shared readers and writer helpers directly: every refusal they make, with its message."""

from __future__ import annotations

import json
import os

import pytest

from fleetplan.catalogs.input_files import read_csv_table, read_json, read_mapping, yaml_mapping
from fleetplan.errors import FleetplanError, InvalidValueError
from fleetplan.exports import read_plan_json
from fleetplan.exports.atomic import remove_stale_temporaries
from fleetplan.exports.parquet import read_sweep_batches
from fleetplan.sweeps.inputs import parse_axis
from fleetplan.sweeps.vllm_results import read_benchmark_json


def test_a_table_split_by_semicolons_is_refused_not_misread(tmp_path):
    path = tmp_path / "prices.csv"
    path.write_text("\ufeffgpu;usd_per_gpu_hour\nh100-sxm;2,10\n")
    with pytest.raises(InvalidValueError, match="prices.csv: its values are separated by ';'"):
        read_csv_table(path)
    path.write_text("gpu,settings\nh100-sxm,a=1;b=2\n")  # a semicolon inside a value is fine
    assert read_csv_table(path)["settings"].tolist() == ["a=1;b=2"]


def test_a_line_with_more_fields_names_its_line(tmp_path):
    path = tmp_path / "prices.csv"
    path.write_text("gpu,usd_per_gpu_hour\nh100-sxm,2.10\nl40s,1,25\n")
    expected = r"prices.csv: not a readable CSV file \(line 3 has 3 fields where the lines before"
    with pytest.raises(InvalidValueError, match=expected):
        read_csv_table(path)


def test_a_recursive_yaml_alias_is_refused():
    with pytest.raises(InvalidValueError, match="alias refers to itself"):
        yaml_mapping("a: &a [1, *a]\n", "x.yaml")


def test_shared_aliases_within_the_limit_load():
    assert yaml_mapping("a: &a [1, 2]\nb: *a\nc: *a\n", "x.yaml") == {"a": [1, 2], "b": [1, 2], "c": [1, 2]}


def test_json_keys_given_twice_are_refused(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text('{"status": "optimal", "status": "infeasible"}')
    with pytest.raises(InvalidValueError, match="duplicate key 'status'"):
        read_json(path)


def test_a_long_top_level_list_in_toml_is_refused(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("workloads = [" + ", ".join(["{name = 'w'}"] * 3) + "]\n")
    with pytest.raises(InvalidValueError, match="workloads: at most 2 entries, got 3"):
        read_mapping(path, "scenario file", limits={"workloads": 2})


def test_a_plan_whose_table_does_not_fit_is_refused(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"status": "optimal", "tables": {"fleet": [{"gpu": "l40s"}]}, "colour": 1}))
    with pytest.raises(InvalidValueError, match="not a fleetplan plan"):
        read_plan_json(path)


def _plan_with_nodes(rows: list[dict]) -> dict:
    return {"status": "optimal", "gap": 0.0, "objective_usd": 1.0, "usd_per_month": 1.0,
            "solver": "HiGHS", "solve_seconds": 0.1, "tables": {"nodes": rows}}


@pytest.mark.parametrize(("cell", "message"), [
    ("abc", r"damaged plan: tables.nodes\[1\].usd_per_month is 'abc', where the column holds a "
            r"number$"),
    ([], r"tables.nodes\[1\].usd_per_month is \[\], where the column holds a number$"),
    ({"a": 1}, r"tables.nodes\[1\].usd_per_month is \{'a': 1\}"),
    (True, r"tables.nodes\[1\].usd_per_month is True, where the column holds a number$"),
])
def test_a_plan_cell_of_the_wrong_kind_is_refused(tmp_path, cell, message):
    path = tmp_path / "plan.json"
    rows = [{"gpu": "l40s", "usd_per_month": 10.0}, {"gpu": "l4", "usd_per_month": cell},
            {"gpu": "h200", "usd_per_month": None}]
    path.write_text(json.dumps(_plan_with_nodes(rows)))
    with pytest.raises(InvalidValueError, match=message):
        read_plan_json(path)
    rows[1]["usd_per_month"] = 20  # a whole number in a column of numbers is a number
    path.write_text(json.dumps(_plan_with_nodes(rows)))
    assert read_plan_json(path).nodes["usd_per_month"].sum() == 30.0


def test_a_missing_sweep_is_refused(tmp_path):
    with pytest.raises(InvalidValueError, match="sweep not found"):
        read_sweep_batches(tmp_path / "missing.parquet")


def test_a_benchmark_result_that_is_not_an_object_is_refused(tmp_path):
    path = tmp_path / "result.json"
    path.write_text("[1, 2]")
    with pytest.raises(InvalidValueError, match="not a serving-benchmark result .*got list"):
        read_benchmark_json(path, gpu="h100-sxm", tp=1)


def test_a_comma_list_of_ranges_is_capped_too():
    with pytest.raises(FleetplanError, match="more than 100,000 values"):
        parse_axis("1-60000:1,1-60000:1")


def test_temporaries_of_a_live_process_are_kept(tmp_path):
    target = tmp_path / "grid.parquet"
    live = tmp_path / f".grid.parquet.{os.getpid()}-abc.tmp"
    dead = tmp_path / ".grid.parquet.999999999-abc.tmp"
    for path in (live, dead):
        path.write_text("x")
    assert remove_stale_temporaries(target) == [dead]
    assert live.exists()


def test_a_json_scenario_is_read_strictly_too(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text('{"name": "a", "workloads": [], "name": "b"}')
    with pytest.raises(InvalidValueError, match="duplicate key 'name'"):
        read_mapping(path, "scenario file")
    path.write_text('{"name": "a", "workloads": [1, 2, 3]}')
    with pytest.raises(InvalidValueError, match="workloads: at most 2 entries, got 3"):
        read_mapping(path, "scenario file", limits={"workloads": 2})
