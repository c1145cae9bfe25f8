"""Every way a catalog file can be wrong gives one line naming file, row, column and the rule."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from fleetplan.catalogs import CatalogErrors, load_catalogs
from fleetplan.catalogs.schema import catalog_name
from fleetplan.errors import CatalogError, UnknownNameError
from tests.catalogs.conftest import assert_edit_fails, set_cell


def _cell_edit(edit, name, row, column, value):
    return edit(name, lambda frame: set_cell(frame, row, column, value))


@pytest.mark.parametrize(("name", "row", "column", "value", "expected"), [
    ("prices", 3, "usd_per_gpu_hour", "cheap",
     "prices.csv row 3, column usd_per_gpu_hour: must be a number, got 'cheap'"),
    ("prices", 2, "usd_per_gpu_hour", "-3",
     "prices.csv row 2, column usd_per_gpu_hour: must be >= 0.01, got -3"),
    ("prices", 2, "usd_per_gpu_hour", "5000",
     "prices.csv row 2, column usd_per_gpu_hour: must be <= 1000, got 5000"),
    ("prices", 2, "usd_per_gpu_hour", "inf",
     "prices.csv row 2, column usd_per_gpu_hour: must be a number, got 'inf'"),
    ("gpus", 3, "gpus_per_node", "2.5",
     "gpus.csv row 3, column gpus_per_node: must be a whole number, got 2.5"),
    ("gpus", 3, "gpus_per_node", "0",
     "gpus.csv row 3, column gpus_per_node: must be >= 1, got 0"),
    ("gpus", 3, "name", "",
     "gpus.csv row 3, column name: must not be empty \\(required\\)"),
    ("gpus", 2, "id", "H100 SXM",
     "gpus.csv row 2, column id: must be a lowercase kebab-case id .*got 'H100 SXM'"),
    ("models", 2, "id", "llama_3",
     "models.csv row 2, column id: must be a lowercase kebab-case id"),
    ("prices", 4, "as_of", "2024/05/01",
     "prices.csv row 4, column as_of: must be a date YYYY-MM-DD, got '2024/05/01'"),
    ("gpus", 2, "as_of", "2024-02-30",
     "gpus.csv row 2, column as_of: must be a date YYYY-MM-DD, got '2024-02-30'"),
    ("prices", 5, "includes_host", "maybe",
     "prices.csv row 5, column includes_host: must be one of true, false, 1, 0, yes, no, "
     "got 'maybe'"),
    ("models", 3, "attention", "moe",
     "models.csv row 3, column attention: must be one of mha, gqa, mla, got 'moe'"),
    ("prices", 2, "pricing_type", "hourly",
     "prices.csv row 2, column pricing_type: must be one of on_demand, spot"),
    ("quants", 2, "compute_precision", "fp32",
     "quants.csv row 2, column compute_precision: must be one of bf16, fp16, fp8, int8, fp4"),
    ("efficiency", 3, "precision", "fp64",
     "efficiency.csv row 3, column precision: must be one of .*\\*, got 'fp64'"),
    ("efficiency", 2, "memory_efficiency", "1.5",
     "efficiency.csv row 2, column memory_efficiency: must be <= 1, got 1.5"),
])
def test_bad_cell_names_file_row_column_and_rule(edit, name, row, column, value, expected):
    assert_edit_fails(edit, name, row, column, value, expected)


def test_an_as_of_after_today_is_refused_and_today_is_not(edit, tmp_path):
    today = dt.date.today()
    tomorrow = (today + dt.timedelta(days=1)).isoformat()
    expected = (f"prices.csv row 3, column as_of: must not be after today "
                f"\\({today.isoformat()}\\), the day the figure was read or quoted, "
                f"got '{tomorrow}'")
    assert_edit_fails(edit, "prices", 3, "as_of", tomorrow, expected)
    own = tmp_path / "quote.csv"  # a file of one's own, read anew (the shipped ones are cached)
    own.write_text("gpu,provider,region,pricing_type,usd_per_gpu_hour,instance,includes_host,"
                   "source,as_of\n"
                   f"h100-sxm,acme,any,on_demand,2.0,8x H100,true,acme quote,{today}\n")
    assert load_catalogs(own).prices["as_of"].astype(str).eq(today.isoformat()).any()


def test_duplicate_key_names_both_rows(edit):
    folder = edit("prices", lambda frame: pd.concat([frame, frame.iloc[[0]]]))
    expected = ("prices.csv row 6, column gpu\\+provider\\+region\\+pricing_type: duplicate key "
                "'h100-sxm/aws/us-east-1/on_demand' \\(first on row 2\\)")
    with pytest.raises(CatalogError, match=expected):
        load_catalogs(data_dir=folder)


def test_duplicate_id(edit):
    folder = edit("gpus", lambda frame: pd.concat([frame, frame.iloc[[1]]]))
    with pytest.raises(CatalogError, match="gpus.csv row 5, column id: duplicate key "
                                           "'a100-80gb-sxm' \\(first on row 3\\)"):
        load_catalogs(data_dir=folder)


def test_unknown_column_suggests_the_close_one(edit):
    folder = edit("prices", lambda frame: frame.rename(columns={"notes": "note"}))
    with pytest.raises(CatalogError, match="prices.csv row 1, column note: unknown column; "
                                           "did you mean 'notes'\\? \\(allowed: gpu, provider"):
        load_catalogs(data_dir=folder)


def test_missing_column(edit):
    folder = edit("gpus", lambda frame: frame.drop(columns=["tdp_w"]))
    with pytest.raises(CatalogError, match="gpus.csv row 1: missing column 'tdp_w'"):
        load_catalogs(data_dir=folder)


@pytest.mark.parametrize(("name", "row", "column", "value", "expected"), [
    ("prices", 2, "gpu", "h100",
     "prices.csv row 2, column gpu: unknown gpu 'h100'; did you mean 'h100-sxm'\\?"),
    ("efficiency", 3, "gpu", "b200",
     "efficiency.csv row 3, column gpu: unknown gpu 'b200'"),
    ("quants", 2, "default_kv_quant", "int4-awq",
     "quants.csv row 2, column default_kv_quant: must be a quant id whose kv_bytes_per_element "
     "is set \\(one of: bf16, fp8\\), got 'int4-awq'"),
    ("quants", 3, "default_kv_quant", "nf4",
     "quants.csv row 3, column default_kv_quant: must be a quant id whose"),
    ("models", 2, "params_active_b", "9",
     "models.csv row 2, column params_active_b: must be <= params_total_b \\(8.03\\), got 9"),
    ("models", 4, "n_experts_active", "9",
     "models.csv row 4, column n_experts_active: must be <= n_experts \\(8\\), got 9"),
    ("models", 3, "n_kv_heads", "7",
     "models.csv row 3, column n_kv_heads: must divide n_heads \\(64\\), got 7"),
    ("models", 5, "kv_lora_rank", "",
     "models.csv row 5, column kv_lora_rank: must not be empty when attention is mla"),
    ("models", 5, "qk_rope_head_dim", "",
     "models.csv row 5, column qk_rope_head_dim: must not be empty when attention is mla"),
])
def test_bad_cross_reference(edit, name, row, column, value, expected):
    assert_edit_fails(edit, name, row, column, value, expected)


def test_mla_heads_need_not_divide(edit):
    folder = _cell_edit(edit, "models", 5, "n_kv_heads", "3")
    assert load_catalogs(data_dir=folder).models.loc["deepseek-v3", "n_kv_heads"] == 3


def test_several_problems_report_the_first_and_a_count(edit):
    def break_three(frame):
        frame = set_cell(frame, 2, "usd_per_gpu_hour", "-1")
        frame = set_cell(frame, 3, "usd_per_gpu_hour", "x")
        return set_cell(frame, 4, "as_of", "soon")

    folder = edit("prices", break_three)
    with pytest.raises(CatalogErrors, match=r"^prices.csv row 3, .* \(and 2 more\)$") as caught:
        load_catalogs(data_dir=folder)
    assert len(caught.value.messages) == 3
    assert all("\n" not in message for message in caught.value.messages)


def test_missing_data_file(data_dir):
    (data_dir / "quants.csv").unlink()
    with pytest.raises(CatalogError, match="quants.csv: catalog file is missing from"):
        load_catalogs(data_dir=data_dir)


def test_default_fills_empty_cell():
    from tests.catalogs.conftest import FIXTURE_DATA

    models = load_catalogs(data_dir=FIXTURE_DATA).models
    assert models.loc["llama-3.1-8b", ["n_experts", "n_experts_active"]].tolist() == [1, 1]


@pytest.mark.parametrize("name", ["gpuz", "pricing", "quantz"])
def test_unknown_catalog_name(name):
    with pytest.raises(UnknownNameError, match=f"unknown catalog '{name}'; did you mean"):
        catalog_name(name)


def test_unknown_catalog_name_in_override_mapping(tmp_path):
    with pytest.raises(UnknownNameError, match="unknown catalog 'price_list'"):
        load_catalogs(overrides={"price_list": [tmp_path / "x.csv"]})
