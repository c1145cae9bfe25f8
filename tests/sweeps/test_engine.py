"""The sweep engine: table shape and dtypes, flags, chunking, overrides and bad input."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.errors import InvalidValueError, UnknownNameError
from fleetplan.sweeps import SWEEP_COLUMNS, iter_sweep, sweep


def test_columns_dtypes_and_row_count():
    df = sweep(["h100-sxm", "l40s"], ["llama-3.1-8b"], ["bf16", "fp8"], tps=[1, 2], contexts=[512, 4096],
               batches=[1, 8, 64])
    assert list(df.columns) == list(SWEEP_COLUMNS)
    assert len(df) == 2 * 2 * 2 * 2 * 3
    for name, column in SWEEP_COLUMNS.items():
        assert str(df[name].dtype) == column.dtype, name
    assert set(df["gpu"].cat.categories) == {"h100-sxm", "l40s"}


def test_tensor_parallelism_shards_weights_and_kv():
    df = sweep(["h100-sxm"], ["llama-3.1-70b"], tps=[2, 4, 8], contexts=[4096], batches=[16])
    assert np.allclose(df["weight_gb"] * df["tp"], df["weight_gb"].iloc[0] * 2)
    assert df["kv_gb"].is_monotonic_decreasing
    assert df["tpot_ms"].is_monotonic_decreasing


@pytest.mark.parametrize(("axes", "reason"), [
    ({"gpus": ["a100-80gb-sxm"], "quants": ["fp8"]}, "a100-80gb-sxm has no native fp8"),
    ({"tps": [3]}, "tp 3 does not divide 32 attention heads"),
    ({"tps": [16]}, "tp 16 exceeds 8 GPUs per node"),
    ({"kv_quants": ["int4-awq"]}, "int4-awq cannot store the KV cache"),
    ({"contexts": [200_000]}, "context_len exceeds the model's max_context"),
    ({"batches": [100_000]}, "KV cache does not fit: batch above max_batch"),
    ({"models": ["llama-3.1-405b"]}, "weights 811.7 GB per GPU leave no KV cache in 85.9 GB under the vllm memory rule"),
])
def test_invalid_rows_are_flagged_not_dropped(axes, reason):
    base = {"gpus": ["h100-sxm"], "models": ["llama-3.1-8b"], "quants": ["bf16"]}
    df = sweep(**{**base, **axes})
    assert len(df) == 1
    assert df["reason"].iloc[0] == reason
    assert not (df["valid"].iloc[0] and df["fits"].iloc[0])
    assert len(sweep(**{**base, **axes}, drop_invalid=True)) == 0


def test_chunks_concatenate_to_the_whole_sweep():
    axes = {"tps": [1, 2], "contexts": [1024, 8192], "batches": [1, 16, 256]}
    whole = sweep(["h100-sxm", "a100-80gb-sxm"], ["llama-3.1-8b", "mixtral-8x7b"], ["bf16", "fp8"], **axes)
    parts = list(iter_sweep(["h100-sxm", "a100-80gb-sxm"], ["llama-3.1-8b", "mixtral-8x7b"], ["bf16", "fp8"],
                            chunk_rows=7, **axes))
    assert all(0 < len(part) <= 7 for part in parts)  # blocks of whole contexts within the limit
    joined = pd.concat([p.astype({c: str for c in ("gpu", "model", "quant", "kv_quant", "reason", "bound")})
                        for p in parts], ignore_index=True)
    expected = whole.astype({c: str for c in ("gpu", "model", "quant", "kv_quant", "reason", "bound")})
    pd.testing.assert_frame_equal(joined, expected)


def test_overrides_change_the_numbers():
    base = sweep(["h100-sxm"], ["llama-3.1-8b"], batches=[32])
    faster = sweep(["h100-sxm"], ["llama-3.1-8b"], batches=[32], mbu=0.95, step_overhead_ms=0.0)
    priced = sweep(["h100-sxm"], ["llama-3.1-8b"], batches=[32], usd_per_gpu_hour=1.0)
    assert faster["tpot_ms"].iloc[0] < base["tpot_ms"].iloc[0]
    assert priced["usd_per_hour"].iloc[0] == 1.0
    assert priced["usd_per_m_output_tokens"].iloc[0] == pytest.approx(
        1e6 / (priced["output_tok_s"].iloc[0] * 3600))


def test_separate_input_lengths_only_change_prefill():
    df = sweep(["h100-sxm"], ["llama-3.1-8b"], contexts=[2048], input_lens=[128, 2048], batches=[8])
    assert df["tpot_ms"].nunique() == 1
    assert df["ttft_ms"].iloc[0] < df["ttft_ms"].iloc[1]


def test_mla_kv_cache_is_small_and_replicated():
    df = sweep(["h200"], ["deepseek-v3"], ["fp8"], tps=[8], contexts=[4096], batches=[1])
    # 61 layers * (512 + 64) * 1 byte per token, the same on every GPU of the replica.
    assert df["kv_gb"].iloc[0] == pytest.approx(4096 * 61 * 576 / 1e9)


def test_moe_reads_fewer_weights_at_batch_one_than_a_dense_model_of_its_size():
    df = sweep(["h100-sxm"], ["mixtral-8x7b"], ["fp8"], tps=[2], batches=[1, 256], contexts=[1024])
    dense_time = df["weight_gb"].iloc[0] / (3.35 * 0.7)  # all weights at MBU 0.7 would take this long
    assert df["tpot_ms"].iloc[0] < dense_time


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"gpus": ["h100"]}, UnknownNameError, r"unknown gpu 'h100'; did you mean 'h100-\w+'"),
    ({"models": ["llama3-8b"]}, UnknownNameError, r"unknown model 'llama3-8b'; did you mean"),
    ({"quants": ["fp9"]}, UnknownNameError, r"unknown quant 'fp9'; did you mean"),
    ({"batches": [0]}, InvalidValueError, r"batches must be whole numbers from 1 to 10,000,000, got 0"),
    ({"contexts": [1.5]}, InvalidValueError, r"contexts must be whole numbers"),
    ({"tps": []}, InvalidValueError, r"tps must hold at least one value"),
    ({"batches": "8-2"}, InvalidValueError, r"range '8-2' must go from a positive start"),
    ({"batches": "eight"}, InvalidValueError, r"'eight' is not a whole number or a range"),
    ({"mbu": 1.5}, InvalidValueError, r"mbu must be > 0 and <= 1, got 1.5"),
    ({"mfu": float("nan")}, InvalidValueError, r"mfu must be a finite number"),
    ({"max_num_seqs": 2.5}, InvalidValueError, r"max_num_seqs must be a whole number"),
    ({"mbuu": 0.5}, UnknownNameError, r"unknown model assumption 'mbuu'; did you mean 'mbu'"),
    ({"gpus": []}, InvalidValueError, r"gpus must name at least one gpu"),
])
def test_bad_input_raises_one_line_naming_the_field(kwargs, error, match):
    base = {"gpus": ["h100-sxm"], "models": ["llama-3.1-8b"], "quants": ["bf16"]}
    with pytest.raises(error, match=match):
        sweep(**{**base, **kwargs})


@settings(max_examples=25, deadline=None)
@given(context=st.integers(1, 100_000), small=st.integers(1, 200), extra=st.integers(1, 200),
       model=st.sampled_from(["llama-3.1-8b", "mixtral-8x7b", "qwen3-30b-a3b"]),
       tp=st.sampled_from([1, 2, 4]))
def test_latency_grows_and_memory_shrinks_with_load(context, small, extra, model, tp):
    df = sweep(["h100-sxm"], [model], ["fp8"], tps=[tp], contexts=[context, context + extra],
               batches=[small, small + extra])
    at = df.set_index(["context_len", "batch"])
    assert at.loc[(context, small + extra), "tpot_ms"] >= at.loc[(context, small), "tpot_ms"]
    assert at.loc[(context + extra, small), "tpot_ms"] >= at.loc[(context, small), "tpot_ms"]
    assert at.loc[(context, small + extra), "decode_tok_s"] >= at.loc[(context, small), "decode_tok_s"] * 0.999
    assert at.loc[(context + extra, small), "max_batch"] <= at.loc[(context, small), "max_batch"]
    assert (df["ttft_ms"] > df["tpot_ms"]).all()


def test_frontier_knee_per_curve():
    from fleetplan.sweeps.operating_points import knees, mark_knees

    table = sweep(["h100-sxm", "l40s"], ["llama-3.1-8b"], ["fp8"], contexts=[2000], batches=range(1, 400))
    marked = mark_knees(table, 25.0)
    assert marked.groupby("gpu", observed=True)["is_knee"].sum().tolist() == [1, 1]
    best = knees(table, 25.0)
    for _, knee in best.iterrows():
        rows = marked[marked["gpu"] == knee["gpu"]]
        assert knee["tpot_ms"] <= 25.0
        assert rows.loc[rows["batch"] == knee["batch"] + 1, "meets_slo"].eq(False).all()
    with pytest.raises(InvalidValueError, match="tpot_slo_ms must be > 0, got -1"):
        mark_knees(table, -1.0)
