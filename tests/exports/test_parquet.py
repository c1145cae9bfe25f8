"""Parquet exports: explicit schema, units and provenance, read back by pandas, DuckDB, Polars."""

from __future__ import annotations

import json

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fleetplan
from fleetplan.errors import InvalidValueError
from fleetplan.exports import write_sweep
from fleetplan.exports.parquet import CATEGORY, read_provenance, write_sweep_parquet
from fleetplan.sweeps.columns import SWEEP_COLUMNS
from tests.exports.samples import synthetic_sweep

METADATA = {"gpus": "h100-sxm,l4", "batches": "1-128", "tpot_slo_ms": 25.0}


def _chunks(frame: pd.DataFrame, size: int):
    for start in range(0, len(frame), size):
        yield frame.iloc[start:start + size]


def test_schema_follows_the_registry(tmp_path):
    path = write_sweep(synthetic_sweep(), tmp_path / "s.parquet", metadata=METADATA)
    schema = pq.read_schema(path)
    assert schema.names == list(SWEEP_COLUMNS)
    for name, column in SWEEP_COLUMNS.items():
        field = schema.field(name)
        expected = CATEGORY if column.dtype == "category" else pa.from_numpy_dtype(column.dtype)
        assert field.type == expected, name
        assert field.metadata[b"unit"].decode() == column.unit
        assert field.metadata[b"description"].decode() == column.description
    group = pq.read_metadata(path).row_group(0)
    columns = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    assert columns["gpu"].compression == "ZSTD"
    assert "BYTE_STREAM_SPLIT" in columns["tpot_ms"].encodings
    assert "RLE_DICTIONARY" in columns["gpu"].encodings


def test_provenance_metadata(tmp_path, shipped):
    path = write_sweep(synthetic_sweep(), tmp_path / "s.parquet", metadata=METADATA)
    record = read_provenance(path)
    assert record["fleetplan_version"] == fleetplan.__version__
    assert record["kind"] == "sweep"
    assert record["parameters"] == METADATA
    assert record["catalog_versions"] == json.loads(json.dumps(shipped.versions()))
    assert record["created"].endswith("+00:00")


def test_sweep_cli_run_record_is_understood(tmp_path):
    run = {"fleetplan_version": "x", "created": "2026-01-02T03:04:05+00:00",
           "catalogs": {"gpus": {"sha256": "ab", "rows": 1}}, "parameters": {"batches": "1-8"}}
    record = read_provenance(write_sweep(synthetic_sweep(), tmp_path / "s.parquet", metadata=run))
    assert record["catalog_versions"] == {"gpus": {"sha256": "ab", "rows": 1}}
    assert record["parameters"] == {"batches": "1-8"}
    assert record["created"] == "2026-01-02T03:04:05+00:00"


def test_read_back_by_pandas_duckdb_polars(tmp_path):
    frame = synthetic_sweep()
    path = write_sweep(_chunks(frame, 7), tmp_path / "s.parquet", metadata=METADATA)
    assert pq.read_metadata(path).num_row_groups == -(-len(frame) // 7)
    back = pd.read_parquet(path)
    pd.testing.assert_frame_equal(back.astype({c: str for c in ("gpu", "model", "quant",
                                                                "kv_quant", "reason", "bound")}),
                                  frame.astype({c: str for c in ("gpu", "model", "quant",
                                                                 "kv_quant", "reason", "bound")}))
    assert isinstance(back["gpu"].dtype, pd.CategoricalDtype)
    rows = duckdb.sql(f"SELECT gpu, sum(batch) AS b FROM read_parquet('{path}') GROUP BY gpu "
                      "ORDER BY gpu").fetchall()
    assert rows == sorted(frame.groupby("gpu", observed=True)["batch"].sum().items())
    kv = dict(duckdb.sql(f"SELECT decode(key), decode(value) FROM parquet_kv_metadata('{path}')")
              .fetchall())
    assert json.loads(kv["parameters"]) == METADATA
    assert json.loads(kv["columns"])["tpot_ms"]["unit"] == "ms"
    polars = pl.read_parquet(path)
    assert polars.height == len(frame)
    assert polars["usd_per_hour"].to_list() == frame["usd_per_hour"].tolist()
    assert json.loads(pl.read_parquet_metadata(path)["parameters"]) == METADATA


def test_chunks_with_different_categories_read_back(tmp_path):
    frame = synthetic_sweep()
    first = frame[frame["gpu"] == "l4"].copy()
    second = frame[frame["gpu"] != "l4"].copy()
    first["gpu"] = first["gpu"].astype(str).astype("category")  # only 'l4' as category
    path = write_sweep([first, second], tmp_path / "s.parquet")
    back = pd.read_parquet(path)
    expected = [*first["gpu"].astype(str), *second["gpu"].astype(str)]
    assert back["gpu"].astype(str).tolist() == expected


def test_extra_columns_are_inferred(tmp_path):
    frame = synthetic_sweep().assign(id=lambda f: [f"case-{i}" for i in range(len(f))],
                                     tpot_slo_ms=25.0, note=None)
    path = write_sweep(frame, tmp_path / "cases.parquet")
    schema = pq.read_schema(path)
    assert schema.field("id").type == pa.string()
    assert schema.field("tpot_slo_ms").type == pa.float64()
    assert schema.field("tpot_slo_ms").metadata[b"unit"] == b"ms"
    assert schema.field("note").type == pa.string()
    assert pd.read_parquet(path)["id"].tolist() == frame["id"].tolist()


def test_hive_partitioned_dataset(tmp_path):
    frame = synthetic_sweep()
    frame["model"] = pd.Categorical(["llama/8b" if i % 2 else "mixtral-8x7b"
                                     for i in range(len(frame))])
    folder = write_sweep(_chunks(frame, 11), tmp_path / "sweep.parquet", metadata=METADATA,
                         partition_by=["gpu", "model"])
    files = sorted(folder.rglob("*.parquet"))
    assert {f.parent.parent.name for f in files} == {f"gpu={g}" for g in frame["gpu"].unique()}
    assert any("llama%2F8b" in f.parent.name for f in files)
    back = pd.read_parquet(folder)
    assert len(back) == len(frame)
    assert set(back["model"].astype(str)) == {"llama/8b", "mixtral-8x7b"}
    glob = f"{folder}/**/*.parquet"
    counts = dict(duckdb.sql(f"SELECT model, count(*) FROM read_parquet('{glob}', "
                             "hive_partitioning=true) GROUP BY model").fetchall())
    assert counts == frame["model"].astype(str).value_counts().to_dict()
    lazy = pl.scan_parquet(glob, hive_partitioning=True).collect()
    assert lazy.height == len(frame)
    assert sorted(lazy["gpu"].unique().to_list()) == sorted(frame["gpu"].astype(str).unique())
    for file in files:
        assert read_provenance(file)["parameters"] == METADATA
        assert json.loads(pl.read_parquet_metadata(file)["parameters"]) == METADATA


def test_real_sweep_round_trip(tmp_path, real_sweep):
    path = write_sweep_parquet(real_sweep, tmp_path / "real.parquet", metadata=METADATA)
    back = pd.read_parquet(path)
    pd.testing.assert_frame_equal(back, real_sweep, check_categorical=False)


def test_no_chunks_writes_an_empty_table(tmp_path):
    path = write_sweep(iter([]), tmp_path / "empty.parquet")
    assert pq.read_schema(path).names == list(SWEEP_COLUMNS)
    assert pq.read_metadata(path).num_rows == 0


def test_chunks_must_share_columns(tmp_path):
    frame = synthetic_sweep()
    with pytest.raises(InvalidValueError, match="chunk columns"):
        write_sweep([frame, frame.drop(columns="tpot_ms")], tmp_path / "s.parquet")


def test_chunks_must_be_frames(tmp_path):
    with pytest.raises(InvalidValueError, match="must be pandas DataFrames"):
        write_sweep([synthetic_sweep(), {"a": 1}], tmp_path / "s.parquet")


def test_unwritable_column_is_named(tmp_path):
    frame = synthetic_sweep()
    frame["tp"] = frame["tp"].astype(float)
    frame.loc[0, "tp"] = 1.5  # a fraction of a GPU: int16 cannot hold it
    with pytest.raises(InvalidValueError, match="column 'tp' cannot be written"):
        write_sweep(frame, tmp_path / "s.parquet")


def test_unknown_partition_column(tmp_path):
    with pytest.raises(InvalidValueError, match="partition_by column 'vendor'"):
        write_sweep(synthetic_sweep(), tmp_path / "s.parquet", partition_by=["vendor"])


def test_lever_and_disaggregation_columns_carry_their_registry_entries(tmp_path):
    from fleetplan.sweeps import sweep
    from fleetplan.sweeps.columns import DISAGGREGATION_COLUMNS, LEVER_COLUMNS

    frame = sweep(["h200"], ["llama-3.1-8b"], batches=[1, 8], prefill_gpus=["none", "h100-sxm"],
                  prefix_hit_rate=[0.0, 0.5])
    path = write_sweep(frame, tmp_path / "split.parquet")
    schema = pq.read_schema(path)
    for name, column in {**DISAGGREGATION_COLUMNS, "prefix_hit_rate": LEVER_COLUMNS["prefix_hit_rate"]}.items():
        field = schema.field(name)
        assert field.metadata[b"description"].decode() == column.description
        assert field.metadata[b"unit"].decode() == column.unit
    assert schema.field("prefill_gpu").type == CATEGORY and schema.field("prefill_tp").type == pa.int16()
    back = duckdb.sql(f"select prefill_gpu, max(prefill_replicas) as r from '{path}' group by 1 order by 1").fetchall()
    assert back[0][0] == "h100-sxm" and back[0][1] > 0 and back[1] == ("none", 0.0)
