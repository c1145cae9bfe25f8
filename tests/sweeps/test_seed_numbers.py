"""Seed 000's worked numbers for Llama 3.1 8B bf16 on one H100 SXM, each within 1%.

Assumptions as in the seed: MBU 0.7, MFU 0.5, no overheads (``step_overhead_ms`` 0 replaces all of
the engine's), no runtime reserve.
"""

import pandas as pd
import pytest

from fleetplan.sweeps import estimate_cases, sweep
from fleetplan.sweeps.throughput import decode_ceiling_tok_s, usd_per_m_tokens

SEED = {"mbu": 0.7, "mfu": 0.5, "step_overhead_ms": 0.0, "reserve_fraction": 0.0}
AXES = {"gpus": ["h100-sxm"], "models": ["llama-3.1-8b"], "quants": ["bf16"]}


def test_single_stream_about_147_tokens_per_second():
    # Seed 03a's single stream reads the weights once per token; a short context keeps KV negligible.
    row = sweep(**AXES, contexts=[16], batches=[1], **SEED).iloc[0]
    assert row["decode_tok_s"] == pytest.approx(147, rel=0.01)


def test_decode_ceiling_about_8950_tokens_per_second(shipped):
    gpu, model = shipped.gpus.loc["h100-sxm"], shipped.models.loc["llama-3.1-8b"]
    kv = 2 * model["n_layers"] * model["n_kv_heads"] * model["head_dim"] * 2
    assert decode_ceiling_tok_s(gpu["memory_bw_tb_s"], 0.7, 2000, kv) == pytest.approx(8950, rel=0.01)
    # The sweep approaches it from below as the batch grows (memory permitting).
    rows = sweep(**AXES, contexts=[2000], batches=[64, 128, 240], **SEED)
    assert rows["decode_tok_s"].is_monotonic_increasing
    assert rows["decode_tok_s"].max() < 8950


def test_knee_under_25_ms_is_batch_162_at_about_6500_tokens_per_second():
    case = pd.DataFrame([{"gpu": "h100-sxm", "model": "llama-3.1-8b", "quant": "bf16", "tp": 1,
                          "input_len": 2000, "output_len": 2, "tpot_slo_ms": 25.0}])
    row = estimate_cases(case, **SEED).iloc[0]
    assert row["context_len"] == 2001
    assert row["batch"] == pytest.approx(162, rel=0.01)
    assert row["decode_tok_s"] == pytest.approx(6500, rel=0.01)
    assert row["tpot_ms"] <= 25.0


def test_knee_from_sweep_rows_matches():
    rows = sweep(**AXES, contexts=[2000], batches=range(150, 175), **SEED)
    knee = rows[rows["tpot_ms"] <= 25.0].iloc[-1]
    assert knee["batch"] == 162
    assert knee["decode_tok_s"] == pytest.approx(6500, rel=0.01)


def test_prefill_about_30900_tokens_per_second_for_a_short_prompt():
    row = sweep(**AXES, contexts=[16], batches=[1], **SEED).iloc[0]
    assert row["prefill_tok_s"] == pytest.approx(30900, rel=0.01)


def test_cost_per_million_tokens_at_2_dollars_and_6000_tokens_per_second():
    assert usd_per_m_tokens(2.0, 6000) == pytest.approx(0.093, rel=0.01)
