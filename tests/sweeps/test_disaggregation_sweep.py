"""Prefill/decode disaggregation as a sweep axis: known values, colocated rows, errors, CLI."""

import math

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.errors import InvalidValueError, UnknownNameError
from fleetplan.sweeps import SWEEP_COLUMNS, iter_sweep, sweep
from fleetplan.sweeps.columns import DISAGGREGATION_COLUMNS
from fleetplan.sweeps.disaggregation import disaggregated
from fleetplan.sweeps.sweep_table import PREFILL_DOES_NOT_FIT

S, G = 4000, 500
PAIR = {"gpus": ["h200"], "models": ["llama-3.1-70b"], "quants": ["fp8"], "tps": [2],
        "contexts": [math.ceil(S + G / 2)], "input_lens": [S], "output_lens": [G]}


def pair_sweep(**kwargs):
    return sweep(**{**PAIR, "prefill_gpus": ["h100-sxm"], "prefill_tps": [4], **kwargs})


def test_row_equals_the_disaggregated_pair_at_the_same_decode_batch():
    case = pd.DataFrame([{"model": "llama-3.1-70b", "quant": "fp8", "input_len": S, "output_len": G,
                          "prefill_gpu": "h100-sxm", "prefill_tp": 4, "decode_gpu": "h200", "decode_tp": 2,
                          "tpot_slo_ms": 40.0}])
    pair = disaggregated(case).iloc[0]
    row = pair_sweep(batches=[int(pair["decode_batch"])]).iloc[0]
    assert row["valid"] and row["fits"] and row["reason"] == ""
    same = {"tpot_ms": "tpot_ms", "ttft_ms": "ttft_ms", "kv_transfer_ms": "kv_transfer_ms", "req_s": "decode_req_s",
            "usd_per_m_output_tokens": "usd_per_m_output_tokens", "usd_per_k_requests": "usd_per_k_requests",
            "prefill_replicas": "prefill_replicas_per_decode_replica"}
    for sweep_column, pair_column in same.items():
        assert row[sweep_column] == pytest.approx(pair[pair_column], rel=1e-6), sweep_column
    # 80 layers x 8 KV heads x 128 x 2 (K, V) x 1 byte (fp8) per token, over min(4, 2) links of 50 GB/s.
    assert row["kv_transfer_ms"] == pytest.approx(S * 163840 / (2 * 50e9) * 1e3)


def test_prefill_replicas_and_price_by_hand():
    row = pair_sweep(batches=[48]).iloc[0]
    decode_price = sweep(**PAIR, batches=[48]).iloc[0]["usd_per_hour"]
    prefill = sweep(["h100-sxm"], ["llama-3.1-70b"], ["fp8"], tps=[4], contexts=[S], batches=[1]).iloc[0]
    assert row["req_s"] == pytest.approx(48 / (G * row["tpot_ms"] / 1e3))
    assert row["prefill_tok_s"] == pytest.approx(prefill["prefill_tok_s"])  # the prefill replica's own roof
    prefill_work_s = S / row["prefill_tok_s"]
    assert row["prefill_replicas"] == pytest.approx(row["req_s"] * prefill_work_s)
    assert row["usd_per_hour"] == pytest.approx(decode_price + row["prefill_replicas"] * prefill["usd_per_hour"])
    assert row["usd_per_m_output_tokens"] == pytest.approx(row["usd_per_hour"] * 1e6 / (row["req_s"] * G * 3600))
    assert row["output_tok_s"] == pytest.approx(row["req_s"] * G)


def test_colocated_rows_equal_a_sweep_without_the_axis():
    axes = {"gpus": ["h100-sxm", "a100-80gb-sxm"], "models": ["llama-3.1-8b", "llama-3.1-70b"],
            "quants": ["bf16", "fp8"], "tps": [1, 2], "contexts": [2048, 200_000], "input_lens": [512, 4096],
            "output_lens": [256], "batches": [1, 64, 2048], "prefix_hit_rate": [0.0, 0.5]}
    plain = sweep(**axes)
    split = sweep(**axes, prefill_gpus=["l40s", "none"], prefill_tps=[1, 2])
    colocated = split[split["prefill_gpu"] == "none"].reset_index(drop=True)
    assert len(split) == 3 * len(plain) and len(colocated) == len(plain)
    assert (colocated["prefill_tp"] == 0).all() and (colocated["prefill_replicas"] == 0).all()
    assert (colocated["kv_transfer_ms"] == 0).all()
    assert set(plain["reason"].astype(str)) > {""}  # the grid exercises invalid and misfit rows
    for name in plain.columns:
        expected, got = plain[name], colocated[name]
        if isinstance(expected.dtype, pd.CategoricalDtype):
            expected, got = expected.astype(str), got.astype(str)
        pd.testing.assert_series_equal(got, expected, check_names=False, obj=name)


def test_columns_only_when_the_axis_is_on():
    plain = sweep(**PAIR, batches=[8])
    assert list(plain.columns) == list(SWEEP_COLUMNS)
    split = pair_sweep(batches=[8], prefill_gpus=["none", "h100-sxm"], prefill_tps=[1, 2])
    names = list(split.columns)
    assert names[5:7] == ["prefill_gpu", "prefill_tp"] and names[-2:] == ["prefill_replicas", "kv_transfer_ms"]
    assert {name: str(split[name].dtype) for name in DISAGGREGATION_COLUMNS} == {
        "prefill_gpu": "category", "prefill_tp": "int16", "prefill_replicas": "float32", "kv_transfer_ms": "float32"}
    # "none" is one pair; each prefill GPU is crossed with every prefill TP.
    pairs = list(zip(split["prefill_gpu"].astype(str), split["prefill_tp"]))
    assert pairs == [("none", 0), ("h100-sxm", 1), ("h100-sxm", 2)]


def test_prefill_gpu_without_native_fp8_gives_an_invalid_row():
    row = pair_sweep(batches=[8], prefill_gpus=["a100-80gb-sxm"]).iloc[0]
    assert not row["valid"] and row["reason"] == "prefill: a100-80gb-sxm has no native fp8"


def test_prefill_replica_too_small_for_one_prompt_does_not_fit():
    # l40s x4: 35.3 GB of bf16 weights per GPU leave 7.9 GB; a 100k-token prompt needs 8.2 GB of KV.
    table = sweep(["h200"], ["llama-3.1-70b"], ["bf16"], tps=[2], contexts=[100_250], input_lens=[100_000],
                  output_lens=[500], batches=[1], prefill_gpus=["none", "l40s"], prefill_tps=[4])
    colocated, split = table.iloc[0], table.iloc[1]
    assert colocated["fits"] and colocated["max_batch"] >= 1
    assert split["valid"] and not split["fits"] and split["reason"] == PREFILL_DOES_NOT_FIT


def test_chunks_concatenate_to_the_whole_sweep():
    axes = {**PAIR, "batches": [1, 8, 64], "output_lens": [128, 512], "prefill_gpus": ["none", "h100-sxm", "h200"],
            "prefill_tps": [1, 4]}
    whole = sweep(**axes)
    chunks = list(iter_sweep(chunk_rows=4, **axes))
    assert len(chunks) > 1
    streamed = pd.concat([c.astype({n: str for n in c.columns if isinstance(c[n].dtype, pd.CategoricalDtype)})
                          for c in chunks], ignore_index=True)
    expected = whole.astype({n: str for n in whole.columns if isinstance(whole[n].dtype, pd.CategoricalDtype)})
    pd.testing.assert_frame_equal(streamed, expected)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"prefill_gpus": ["h100"]}, UnknownNameError, r"prefill_gpus: unknown gpu 'h100'; did you mean 'h100-nvl'"),
    ({"prefill_gpus": ["none", "h2000"]}, UnknownNameError, r"prefill_gpus: unknown gpu 'h2000'; did you mean 'h200'"),
    ({"prefill_gpus": []}, InvalidValueError, r"prefill_gpus must name at least one gpu or 'none'"),
    ({"prefill_gpus": ["h100-sxm"], "prefill_tps": [0]}, InvalidValueError,
     r"^prefill_tps must be whole numbers from 1 to 1,024, got 0$"),
    ({"prefill_gpus": ["h100-sxm"], "prefill_tps": [1.5]}, InvalidValueError, r"prefill_tps must be whole numbers"),
    ({"prefill_tps": [2]}, InvalidValueError, r"prefill_tps needs prefill_gpus"),
])
def test_bad_prefill_axis_raises_one_line_naming_the_field(kwargs, error, match):
    with pytest.raises(error, match=match):
        sweep(**PAIR, **kwargs)


def test_cli_writes_the_columns_to_parquet(tmp_path, capsys):
    from fleetplan.cli import main

    path = tmp_path / "split.parquet"
    code = main(["sweep", "--gpu", "h200", "--model", "llama-3.1-70b", "--quant", "fp8", "--tp", "2",
                 "--context", "4250", "--input-len", "4000", "--output-len", "500", "--batch", "8,64",
                 "--prefill-gpu", "none,h100-sxm", "--prefill-tp", "1,2", "-o", str(path)])
    assert code == 0
    table = pq.read_table(path).to_pandas()
    assert set(DISAGGREGATION_COLUMNS) <= set(table.columns) and len(table) == 2 * 3
    assert sorted(set(table["prefill_gpu"].astype(str))) == ["h100-sxm", "none"]
    assert (table.loc[table["prefill_gpu"] == "none", "prefill_replicas"] == 0).all()
    assert main(["sweep", "--gpu", "h200", "--model", "llama-3.1-70b", "--prefill-gpu", "h100"]) == 2
    assert "prefill_gpus: unknown gpu 'h100'" in capsys.readouterr().err


def test_dataset_partition_keeps_the_columns(tmp_path):
    from fleetplan.exports.sweep_dataset import write_partition
    from fleetplan.sweeps.sweep_grid import make_grid

    grid = make_grid(**{**PAIR, "batches": [8]}, prefill_gpus=["none", "h100-sxm"])
    (values, configs), = grid.partitions()
    rows = write_partition(grid, values, configs, str(tmp_path), 100, {"test": "yes"})
    written = pq.read_table(tmp_path / "gpu=h200" / "model=llama-3.1-70b" / "part-0.parquet")
    assert rows == 2 and set(DISAGGREGATION_COLUMNS) <= set(written.schema.names)


@settings(max_examples=20, deadline=None)
@given(batches=st.lists(st.integers(1, 256), min_size=2, max_size=4, unique=True),
       output_len=st.integers(16, 2000), input_len=st.integers(16, 8000),
       prefill_tp=st.sampled_from([1, 2, 4, 8]), prefill_gpu=st.sampled_from(["h100-sxm", "l40s", "mi300x"]))
def test_prefill_replicas_scale_with_req_s_and_never_cheapen_the_decode_replica(
        batches, output_len, input_len, prefill_tp, prefill_gpu):
    table = sweep(["h100-sxm"], ["llama-3.1-8b"], ["bf16"], contexts=[input_len + output_len], input_lens=[input_len],
                  output_lens=[output_len], batches=batches, prefill_gpus=["none", prefill_gpu],
                  prefill_tps=[prefill_tp])
    colocated = table[table["prefill_gpu"] == "none"].set_index("batch")
    split = table[table["prefill_gpu"] == prefill_gpu].set_index("batch")
    ratio = (split["prefill_replicas"] / split["req_s"]).to_numpy()
    assert np.allclose(ratio, ratio[0], rtol=1e-6)  # float32 columns; prefill work per request: one number per prompt length
    assert (ratio > 0).all()
    assert (split["usd_per_hour"] >= colocated["usd_per_hour"]).all()
    assert (split["tpot_ms"] == colocated["tpot_ms"]).all()
