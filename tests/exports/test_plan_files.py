"""Plans as Parquet (folder or suffix-named files) and JSON; suffix dispatch errors."""

from __future__ import annotations

import copy
import json
import math
import os

import duckdb
import pandas as pd
import polars as pl
import pyarrow.parquet as pq
import pytest

import fleetplan
from fleetplan.catalogs.jsonable import jsonable
from fleetplan.errors import InvalidValueError
from fleetplan.exports import write_plan, write_sweep
from fleetplan.exports.parquet import read_provenance
from fleetplan.exports.plan_json import plan_json_text, read_plan_json
from fleetplan.exports.plan_parquet import plan_tables
from fleetplan.optimizer.commitment_risk import COLUMNS, value_of_stochastic_solution
from tests.exports.samples import synthetic_sweep


def test_parquet_folder_read_back(tmp_path, example_plan):
    folder = write_plan(example_plan, tmp_path / "plan.parquet")
    names = sorted(p.name for p in folder.glob("*.parquet"))
    assert names == sorted(f"{n}.parquet" for n in plan_tables(example_plan))
    fleet = pd.read_parquet(folder / "fleet.parquet")
    pd.testing.assert_frame_equal(fleet, example_plan.fleet.reset_index(drop=True),
                                  check_dtype=False)
    total = duckdb.sql(f"SELECT sum(usd_per_month) FROM read_parquet('{folder}/fleet.parquet')"
                       ).fetchall()[0][0]
    assert total == pytest.approx(example_plan.fleet["usd_per_month"].sum())
    summary = pl.read_parquet(folder / "summary.parquet")
    assert summary["status"].to_list() == [example_plan.status]
    assert summary["usd_per_month"].to_list() == pytest.approx([example_plan.usd_per_month])
    record = read_provenance(folder / "fleet.parquet")
    assert record["kind"] == "plan.fleet"
    assert record["fleetplan_version"] == fleetplan.__version__
    assert record["parameters"]["scenario"]["name"] == "exports example"
    assert record["catalog_versions"] == json.loads(json.dumps(
        example_plan.assumptions["catalog_versions"]))
    kv = pl.read_parquet_metadata(folder / "workloads.parquet")
    assert json.loads(kv["columns"])["usd_per_m_tokens"]["unit"] == "USD/1M tokens"
    schema = pq.read_schema(folder / "fleet.parquet")
    assert schema.field("usd_per_month").metadata[b"unit"] == b"USD/month"


def test_parquet_files_layout(tmp_path, example_plan):
    write_plan(example_plan, tmp_path / "q1.parquet", layout="files")
    names = sorted(os.listdir(tmp_path))
    assert names == sorted(f"q1.{n}.parquet" for n in plan_tables(example_plan))
    routing = pd.read_parquet(tmp_path / "q1.routing.parquet")
    assert len(routing) == len(example_plan.routing)


def test_parquet_folder_replaces_previous_plan(tmp_path, example_plan, infeasible_plan):
    folder = tmp_path / "plan.parquet"
    write_plan(example_plan, folder)
    write_plan(infeasible_plan, folder)
    assert pd.read_parquet(folder / "summary.parquet")["status"].tolist() == ["infeasible"]
    assert os.listdir(tmp_path) == ["plan.parquet"]


def test_json_round_trip(tmp_path, example_plan):
    path = write_plan(example_plan, tmp_path / "plan.json")
    back = read_plan_json(path)
    assert back.status == example_plan.status
    assert back.fleet["usd_per_month"].tolist() == pytest.approx(
        example_plan.fleet["usd_per_month"].tolist())


def test_bad_layout(tmp_path, example_plan):
    with pytest.raises(InvalidValueError, match="layout must be one of folder, files"):
        write_plan(example_plan, tmp_path / "p.parquet", layout="zip")


@pytest.mark.parametrize(("writer", "path", "message"), [
    ("plan", "plan.csv", r"plan to '.*plan.csv'.*\.xlsx, \.parquet, \.json"),
    ("sweep", "sweep.json", r"sweep to '.*sweep.json'.*\.parquet, \.xlsx, \.csv"),
    ("sweep", "sweep", "must end with"),
])
def test_unknown_suffix(tmp_path, example_plan, writer, path, message):
    monkey_path = tmp_path / path
    with pytest.raises(InvalidValueError, match=message):
        if writer == "plan":
            write_plan(example_plan, monkey_path)
        else:
            write_sweep(synthetic_sweep(), monkey_path)


def test_partitions_need_parquet(tmp_path):
    with pytest.raises(InvalidValueError, match="partition_by needs a .parquet output"):
        write_sweep(synthetic_sweep(), tmp_path / "s.csv", partition_by=["gpu"])


def test_disaggregated_plan_round_trips_with_its_routes(tmp_path, disaggregated_plan):
    back = read_plan_json(write_plan(disaggregated_plan, tmp_path / "plan.json"))
    pd.testing.assert_frame_equal(back.routing.reset_index(drop=True),
                                  disaggregated_plan.routing.reset_index(drop=True), check_dtype=False)
    folder = write_plan(disaggregated_plan, tmp_path / "plan.parquet")
    stages = duckdb.sql(f"SELECT stage, count(*) FROM read_parquet('{folder}/candidates.parquet') "
                        "GROUP BY stage ORDER BY stage").fetchall()
    assert [s for s, _ in stages] == ["decode", "prefill", "serve"]
    routed = pl.read_parquet(folder / "routing.parquet")
    assert routed["route"].n_unique() * 2 == routed.height  # both stages of each routed pair


def test_a_plan_without_figures_round_trips_to_a_workbook(tmp_path, example_plan):
    # JSON writes a missing figure as null: a plan without a solution (no cost), and
    # commitment options none of which was priced in time, once came back as None and objects,
    # and writing their workbook failed
    plan = copy.deepcopy(example_plan)
    plan.objective_usd = plan.usd_per_month = plan.gap = plan.bound_usd = math.nan
    plan.commitments = pd.DataFrame({name: [math.nan, math.nan] for name in COLUMNS}).assign(
        option=["stochastic", "P50 only (s1)"], status="no_solution", scenario="s1",
        probability=1.0, reserved_gpus=[4.0, 2.0])
    plan.assumptions = {**plan.assumptions, "stay_the_course": {
        "stay_usd_total": math.nan, "sunk_usd_total": 0.0, "status": "infeasible"}}
    back = read_plan_json(write_plan(plan, tmp_path / "plan.json"))
    assert math.isnan(back.usd_per_month) and math.isnan(back.objective_usd)
    assert math.isnan(back.assumptions["stay_the_course"]["stay_usd_total"])
    assert back.commitments["over_stochastic_usd_per_month"].dtype == float
    assert back.commitments["option"].tolist() == ["stochastic", "P50 only (s1)"]
    assert math.isnan(value_of_stochastic_solution(back.commitments))
    assert write_plan(back, tmp_path / "plan.xlsx").exists()


def test_tables_are_written_column_by_column_as_value_by_value(tmp_path, example_plan):
    # the fast path per column type gives what jsonable gives each value: unwrapped numbers,
    # None for non-finite numbers and missing values, dates as text, anything else as jsonable
    table = pd.DataFrame({
        "ints": [1, 2, 3], "small": pd.array([1, 2, 3], dtype="int32"),
        "flags": [True, False, True], "nullable": pd.array([1, None, 3], dtype="Int64"),
        "usd": [1.5, math.inf, math.nan], "text": pd.array(["a", None, "c"], dtype="str"),
        "objects": ["x", {"k": math.nan}, None],
        "day": pd.to_datetime(["2027-01-01", None, "2027-03-01"])})
    value_by_value = [{k: jsonable(v) for k, v in row.items()}
                      for row in table.to_dict(orient="records")]
    plan = copy.copy(example_plan)
    plan.routing = table
    assert plan.to_dict()["tables"]["routing"] == value_by_value
    written = json.loads(plan_json_text(plan))["tables"]["routing"]
    assert written == value_by_value and written[1]["usd"] is None
