"""Known values for every formula, each with scalar and array inputs."""

import numpy as np
import pytest
from numpy.testing import assert_allclose

from fleetplan.sweeps import latency, memory, operators, throughput

# Llama 3.1 8B (config.json): 32 layers, 8 KV heads, head_dim 128; H100 SXM: 3.35 TB/s, 989.5 TFLOPS.
KV_8B_BF16 = 131072.0


@pytest.mark.parametrize(("function", "args", "expected"), [
    (memory.weight_gb, (8.03, 2.0), 16.06),
    (memory.weight_gb, (70.6, 0.515625), 36.403125),
    (memory.kv_bytes_per_token, (32, 8, 128, 2.0), KV_8B_BF16),
    (memory.kv_bytes_per_token, (80, 8, 128, 1.0), 163840.0),
    (memory.kv_bytes_per_token_mla, (61, 512, 64, 2.0), 70272.0),
    (memory.capacity_gb, (80.0, True), 85.89934592),
    (memory.capacity_gb, (48.0, False), 48.0),
    (memory.engine_workspace_gb, (1.0, 8192, 4096, 36.0, 1), 1.073741824 + 8192 * 4096 * 36 / 1e9),
    (memory.engine_kv_budget_gb, (0, 80.0, 16.0, 4.0, 0.9), 0.9 * 60.0),
    (memory.engine_kv_budget_gb, (1, 80.0, 16.0, 4.0, 0.9), 72.0 - 16.0 - 4.0),
    (memory.engine_kv_budget_gb, (2, 80.0, 16.0, 4.0, 0.9), 72.0 - 16.0),
    (memory.kv_gb, (162, 2000, KV_8B_BF16), 42.467328),
    (latency.memory_time_ms, (16.0, 3.35, 0.7), 6.8230277),
    (latency.compute_time_ms, (1e15, 1000.0, 0.5, 2), 1000.0),
    (latency.linear_flop_per_token, (8.0,), 16e9),
    (operators.attention_flop_per_pair, (32, 128, False, 0, 0, True), 4 * 32 * 128),
    (operators.attention_flop_per_pair, (128, 192, True, 512, 64, True), 2 * 128 * (2 * 512 + 64)),
    (operators.attention_flop_per_pair, (128, 192, True, 512, 64, False), 4 * 128 * 192),
    (operators.attended_tokens, (5000, 20, 4, 1024), 20 * 5000 + 4 * 1024),
    (operators.causal_pairs, (100, np.inf), 5000.0),
    (operators.causal_pairs, (1000, 128), 128 * 1000 - 128**2 / 2),
    (operators.allreduce_bandwidth_gb_s, (8, 64.0, 4, 56.0, 0.8), 28.0 * 0.8),
    (operators.allreduce_bandwidth_gb_s, (8, 900.0, 8, np.nan, 0.8), 450.0 * 0.8),
    (operators.host_time_ms, (0.5, 4.0, 100), 0.9),
    (throughput.decode_tok_s, (162, 25.0), 6480.0),
    (throughput.decode_ceiling_tok_s, (3.35, 0.7, 2000, KV_8B_BF16), 8945.465088),
    (throughput.prefill_tok_s, (1000, 50.0), 20000.0),
    (throughput.request_rate_req_s, (100, 20.0, 100, 10.0), 1000.0 / 30.0),
    (throughput.little_concurrency, (4.0, 500.0), 2.0),
    (throughput.usd_per_m_tokens, (2.0, 6000.0), 0.0925926),
    (throughput.usd_per_k_requests, (7.2, 2.0), 1.0),
])
def test_known_value_scalar_and_array(function, args, expected):
    assert_allclose(function(*args), expected, rtol=1e-6)
    arrays = [np.full(3, a, dtype=float) for a in args]
    assert_allclose(function(*arrays), np.full(3, expected), rtol=1e-6)


def test_max_batch_floors_and_is_zero_when_weights_do_not_fit():
    assert_allclose(memory.max_batch_fits(np.array([63.94, -1.0, 0.2]), 2000, KV_8B_BF16), [243, 0, 0])


def test_kv_shard_fraction_splits_heads_then_replicates():
    tp = np.array([1, 2, 8, 16])
    assert_allclose(memory.kv_shard_fraction(8, tp, False), [1.0, 0.5, 0.125, 0.125])
    assert_allclose(memory.kv_shard_fraction(128, tp, True), [1.0, 1.0, 1.0, 1.0])


def test_allreduce_is_zero_without_tensor_parallelism_and_ring_scaled_with_it():
    assert float(latency.allreduce_time_ms(1.0, 1, 900.0, 10, 8.0)) == 0.0
    # 1 GB over 8 GPUs: 2 * 7/8 GB over 450 GB/s one way = 3.889 ms, plus 8 us.
    assert_allclose(latency.allreduce_time_ms(1.0, 8, 900.0, 1, 8.0), 2 * 7 / 8 / 450 * 1e3 + 0.008)


def test_experts_touched_limits():
    tokens = np.array([0, 1, 2, 1000])
    touched = latency.experts_touched(8, 2, tokens)
    assert_allclose(touched[:2], [0.0, 2.0])
    assert_allclose(touched[2], 8 * (1 - 0.75**2))
    assert_allclose(touched[3], 8.0)


def test_moe_parameters_split_into_shared_and_experts():
    # Mixtral 8x7B: 46.7 B total, 12.9 B active with 2 of 8 experts.
    expert = operators.expert_params_b(46.7, 12.9, 8, 2)
    dense = operators.dense_params_b(46.7, 8, expert)
    assert_allclose(dense + 2 * expert, 12.9)
    assert_allclose(dense + expert * latency.experts_touched(8, 2, np.array([1, 10_000])), [12.9, 46.7])
    assert_allclose(operators.expert_params_b(8.03, 8.03, 1, 1), 0.0)


def test_zero_or_missing_denominators_give_nan_not_errors():
    assert np.isnan(throughput.decode_tok_s(4, 0.0))
    assert np.isnan(throughput.usd_per_m_tokens(2.0, 0.0))
    assert np.isnan(throughput.request_rate_req_s(0, 10.0, 10, 0.0))
