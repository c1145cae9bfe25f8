"""Id lookups with did-you-mean, sources, the native-GPU view and the protected cache."""

from __future__ import annotations

import pandas as pd
import pytest

from fleetplan.catalogs import load_catalogs
from fleetplan.catalogs.loader import clear_cache
from fleetplan.errors import UnknownNameError
from tests.catalogs.conftest import FIXTURE_DATA


@pytest.fixture
def catalogs():
    return load_catalogs(data_dir=FIXTURE_DATA)


def test_require_returns_canonical_ids_in_order(catalogs):
    assert catalogs.require("gpu", [" H100-SXM", "mi300x"]) == ["h100-sxm", "mi300x"]
    assert catalogs.require("models", "Llama-3.1-8B") == ["llama-3.1-8b"]
    assert catalogs.require("quant", []) == []


@pytest.mark.parametrize(("kind", "name", "expected"), [
    ("gpu", "h100", "unknown gpu 'h100'; did you mean 'h100-sxm'\\? \\(valid: a100-80gb-sxm, "
                    "h100-sxm, mi300x\\)"),
    ("model", "llama-3-8b", "unknown model 'llama-3-8b'; did you mean 'llama-3.1-8b'"),
    ("quant", "awq", "unknown quant 'awq'; did you mean 'int4-awq'"),
    ("gpuz", "h100-sxm", "unknown catalog kind 'gpuz'; did you mean 'gpu'"),
])
def test_require_unknown(catalogs, kind, name, expected):
    with pytest.raises(UnknownNameError, match=f"^{expected}"):
        catalogs.require(kind, [name])


def test_row_lookups(catalogs):
    assert catalogs.gpu("MI300X")["memory_gb"] == 192.0
    assert catalogs.model("deepseek-v3")["kv_lora_rank"] == 512
    assert catalogs.quant("int4-awq")["bytes_per_weight"] == pytest.approx(0.515625)
    with pytest.raises(UnknownNameError, match="unknown model 'gpt-5'"):
        catalogs.model("gpt-5")


def test_row_lookup_is_a_copy(catalogs):
    row = catalogs.gpu("h100-sxm")
    row["memory_gb"] = 1.0
    assert catalogs.gpus.loc["h100-sxm", "memory_gb"] == 80.0


def test_tables_have_schema_dtypes(catalogs):
    assert catalogs.gpus.index.name == "id"
    assert catalogs.gpus["gpus_per_node"].dtype == "int64"
    assert catalogs.models["kv_lora_rank"].dtype == "float64"  # optional int: NaN when empty
    assert catalogs.prices["includes_host"].dtype == bool
    assert catalogs.quants["weight_only"].tolist() == [False, False, True]
    assert isinstance(catalogs.prices.index, pd.RangeIndex)
    assert list(catalogs.efficiency.columns[:3]) == ["engine", "gpu", "operator"]


def test_native_gpus_follow_tflops_columns(catalogs):
    native = catalogs.native_gpus()
    assert native.loc["fp8"].to_dict() == {"h100-sxm": True, "a100-80gb-sxm": False,
                                           "mi300x": True}
    assert native.loc["int4-awq"].all()  # fp16 compute runs everywhere
    assert catalogs.native_gpu_lists()["fp8"] == "h100-sxm, mi300x"


def test_sources(catalogs):
    gpus = catalogs.sources("gpu", ["mi300x"])
    assert gpus.to_dict("records") == [{
        "catalog": "gpus", "key": "mi300x",
        "source": "test fixture (AMD MI300X datasheet figures)", "as_of": "2024-03-10"}]
    efficiency = catalogs.sources("efficiency", ["a100-80gb-sxm"])
    # only the wildcard rows apply (engine/gpu/operator/precision)
    assert efficiency["key"].tolist() == ["*/*/gemm/*", "*/*/expert_gemm/*", "*/*/attention/*",
                                          "*/*/allreduce/*", "*/*/iteration/*"]
    assert len(catalogs.sources("prices")) == 4
    with pytest.raises(UnknownNameError, match="unknown gpu 'b300'"):
        catalogs.sources("prices", ["b300"])


def test_callers_cannot_corrupt_the_cache(fixture_as_default):
    clear_cache()
    first = load_catalogs()
    first.prices.loc[0, "usd_per_gpu_hour"] = 0.01
    first.gpus.loc["mi300x", "memory_gb"] = 1.0
    second = load_catalogs()
    assert second.prices.loc[0, "usd_per_gpu_hour"] == 6.88
    assert second.gpus.loc["mi300x", "memory_gb"] == 192.0
    assert second.versions() != first.versions()


def test_table_by_name(catalogs):
    assert catalogs.table("GPU") is catalogs.gpus
    with pytest.raises(UnknownNameError, match="unknown catalog 'pricez'; did you mean 'prices'"):
        catalogs.table("pricez")
