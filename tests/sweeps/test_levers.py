"""Serving levers: each is off by default, has a known value, and is a sweep axis."""

import numpy as np
import pytest

from fleetplan.errors import InvalidValueError
from fleetplan.sweeps import operators, sweep

SEED = {"mbu": 0.7, "mfu": 0.5, "step_overhead_ms": 0.0, "step_overhead_us_per_seq": 0.0, "reserve_fraction": 0.0,
        "request_overhead_ms": 0.0}
BASE = {"gpus": ["h100-sxm"], "models": ["llama-3.1-8b"], "quants": ["bf16"], **SEED}


def one(**kwargs):
    return sweep(**{**BASE, **kwargs}).iloc[0]


def test_levers_default_off():
    assert one(contexts=[2000], batches=[64])["tpot_ms"] == one(
        contexts=[2000], batches=[64], pp=1, prefix_hit_rate=0.0, spec_tokens=0, dequant_overhead=0.0)["tpot_ms"]


def test_speculative_decoding_divides_the_step_by_the_expected_accepted_tokens():
    # Batch 1 is memory-bound, so verifying 5 tokens costs the same weight reads as one.
    plain = one(contexts=[16], batches=[1])
    fast = one(contexts=[16], batches=[1], spec_tokens=4, spec_acceptance=0.8, spec_draft_cost=0.05)
    expected = plain["tpot_ms"] * (1 + 4 * 0.05) / 3.3616
    assert fast["tpot_ms"] == pytest.approx(expected, rel=1e-3)
    assert fast["decode_tok_s"] > 2.5 * plain["decode_tok_s"]


def test_prefix_caching_prefills_only_the_new_tokens():
    plain = one(contexts=[4000], batches=[1])
    cached = one(contexts=[4000], batches=[1], prefix_hit_rate=0.75)
    def flop(tokens):  # Llama 3.1 8B: 2N per token, 4 h d per causal query-key pair and layer
        return 2 * 8.03e9 * tokens + 32 * 4 * 32 * 128 * operators.causal_pairs(tokens, np.inf)

    full = flop(4000)
    new = full - flop(3000)
    # Compute-bound prefill: the (prefill - step) part scales with the FLOPs.
    assert (cached["ttft_ms"] - cached["tpot_ms"]) / (plain["ttft_ms"] - plain["tpot_ms"]) == pytest.approx(
        new / full, rel=1e-6)
    assert cached["tpot_ms"] == plain["tpot_ms"]


def test_weight_only_dequantization_slows_compute_bound_matmuls_only():
    base = {"quants": ["int4-awq"], "contexts": [128], "batches": [1024]}
    plain, slow = one(**base), one(**base, dequant_overhead=0.5)
    assert slow["tpot_ms"] > plain["tpot_ms"]
    assert one(contexts=[128], batches=[1024], dequant_overhead=0.5)["tpot_ms"] == one(
        contexts=[128], batches=[1024])["tpot_ms"]  # bf16 is not weight-only


def test_pipeline_parallelism_splits_memory_and_adds_hops():
    models = ["llama-3.1-405b"]
    alone = sweep(["h100-sxm"], models, ["bf16"], tps=[8], batches=[1]).iloc[0]
    split = sweep(["h100-sxm"], models, ["bf16"], tps=[8], pp=2, batches=[1]).iloc[0]
    assert alone["reason"].startswith("weights 101.5 GB per GPU")
    assert split["fits"] and split["valid"]
    assert split["weight_gb"] == pytest.approx(405.85 * 2 / 8 * np.ceil(126 / 2) / 126)
    assert split["usd_per_hour"] == pytest.approx(alone["usd_per_hour"] * 2)
    # Batch 1 passes both stages in turn: two half-model steps plus one hop, about one whole step.
    assert split["tpot_ms"] > alone["tpot_ms"] * 0.95


def test_levers_are_sweep_axes():
    table = sweep(**BASE, contexts=[1024], batches=[8], spec_tokens=[0, 2, 4], spec_acceptance=0.7,
                  prefix_hit_rate=[0.0, 0.5])
    assert len(table) == 6
    assert list(table.columns[5:7]) == ["prefix_hit_rate", "spec_tokens"]
    assert table.groupby("spec_tokens")["tpot_ms"].mean().is_monotonic_decreasing


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"spec_acceptance": [0.5, 1.5]}, "spec_acceptance must be numbers from 0 to 0.99, got 1.5"),
    ({"pp": [1, 2.5]}, "pp must be whole numbers from 1 to 64, got 2.5"),
    ({"prefix_hit_rate": 1.0}, r"prefix_hit_rate must be >= 0 and <= 0.99, got 1"),
    ({"spec_tokens": -1}, r"spec_tokens must be >= 0 and <= 16, got -1"),
])
def test_bad_lever_values(kwargs, match):
    with pytest.raises(InvalidValueError, match=match):
        sweep(**BASE, **kwargs)


def test_pipeline_deeper_than_the_model_is_flagged():
    row = sweep(["h100-sxm"], ["llama-3.1-8b"], pp=[64]).iloc[0]
    assert row["reason"] == "pp 64 exceeds 32 layers"


def test_chunked_prefill_trades_tail_inter_token_latency_for_time_to_first_token():
    import pandas as pd

    from fleetplan.sweeps import queueing
    from fleetplan.sweeps.estimate import case_arrays

    cases = pd.DataFrame([{"gpu": "h100-sxm", "model": "llama-3.1-8b", "quant": "fp8", "tp": 1,
                           "input_len": 8192, "output_len": 512, "prefill_chunk_tokens": chunk} for chunk in (0, 1024)])
    _, _, c, rows = case_arrays(cases)
    rate = np.full(2, 0.5 * queueing.capacity_req_s(c, rows)[0])
    state = queueing.at_rate(c, rows, rate)
    assert state["tpot_ms"][1] == state["tpot_ms"][0]  # the same work, spread differently
    assert state["tpot_p99_ms"][1] < state["tpot_p99_ms"][0]
    # Eight chunks ride eight steps instead of one.
    assert state["ttft_ms"][1] - state["ttft_ms"][0] == pytest.approx(7 * state["tpot_ms"][0])


def test_chunked_prefill_is_a_sweep_axis():
    table = sweep(**BASE, contexts=[4000], batches=[32], prefill_chunk_tokens=[0, 512])
    whole, chunked = table.iloc[0], table.iloc[1]
    assert list(table["prefill_chunk_tokens"]) == [0, 512]
    assert chunked["tpot_ms"] == whole["tpot_ms"]
    assert chunked["ttft_ms"] - whole["ttft_ms"] == pytest.approx((np.ceil(4000 / 512) - 1) * whole["tpot_ms"])
