"""Prefill/decode disaggregation: pool capacities, KV transfer and cost per request."""

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetplan.errors import InvalidValueError
from fleetplan.sweeps import estimate_cases
from fleetplan.sweeps.disaggregation import disaggregated


def pair(**values):
    base = {"model": "llama-3.1-70b", "quant": "fp8", "input_len": 4000, "output_len": 500, "prefill_gpu": "h100-sxm",
            "prefill_tp": 4, "decode_gpu": "h200", "decode_tp": 2, "tpot_slo_ms": 40.0}
    return pd.DataFrame([{**base, **values}])


def test_pools_costs_and_transfer_by_hand():
    out = disaggregated(pair()).iloc[0]
    decode = estimate_cases(pd.DataFrame([{"gpu": "h200", "model": "llama-3.1-70b", "quant": "fp8", "tp": 2,
                                           "input_len": 4000, "output_len": 500, "tpot_slo_ms": 40.0}])).iloc[0]
    assert out["tpot_ms"] == pytest.approx(decode["tpot_ms"]) and out["decode_batch"] == decode["batch"]
    assert out["decode_req_s"] == pytest.approx(decode["batch"] / (500 * decode["tpot_ms"] / 1e3))
    # 80 layers x 8 KV heads x 128 x 2 (K, V) x 1 byte (fp8) per token, over 2 links of 50 GB/s.
    assert out["kv_transfer_ms"] == pytest.approx(4000 * 163840 / (2 * 50e9) * 1e3)
    per_request = (out["usd_per_k_requests"] / 1e3)
    assert out["usd_per_m_output_tokens"] == pytest.approx(per_request / 500 * 1e6)
    assert out["ttft_ms"] > out["kv_transfer_ms"] + out["tpot_ms"]
    assert out["valid"] and out["reason"] == ""


def test_decode_steps_are_not_stretched_by_prompts():
    colocated = estimate_cases(pd.DataFrame([{"gpu": "h200", "model": "llama-3.1-70b", "quant": "fp8", "tp": 2,
                                              "input_len": 4000, "output_len": 500, "mode": "offline"}])).iloc[0]
    split = disaggregated(pair(decode_gpu="h200", tpot_slo_ms=float("nan"))).iloc[0]
    # Without prompts to share time with, a decode replica completes more requests.
    assert split["decode_req_s"] > colocated["req_s"]


def test_invalid_sides_are_reported():
    out = disaggregated(pair(prefill_gpu="a100-80gb-sxm")).iloc[0]
    assert not out["valid"] and out["reason"] == "prefill: a100-80gb-sxm has no native fp8"
    with pytest.raises(InvalidValueError, match="disaggregated cases lack the column decode_tp"):
        disaggregated(pair().drop(columns=["decode_tp"]))


def test_a_decode_side_that_cannot_run_serves_nothing():
    # fp4 on an H200 has no decode step (TPOT 0): its pool completes 0 requests/s, not 1e3 / 0
    out = disaggregated(pair(model="gemma-2-27b", quant="fp4", prefill_gpu="b200")).iloc[0]
    assert not out["valid"] and "decode: h200 has no native fp4" in out["reason"]
    assert out["decode_req_s"] == 0.0


def test_cli_disaggregated_estimate(capsys):
    import json

    from fleetplan.cli import main

    code = main(["estimate", "--model", "llama-3.1-70b", "--quant", "fp8", "--gpu", "h200", "--tp", "2",
                 "--prefill-gpu", "h100-sxm", "--prefill-tp", "4", "--input-len", "4000", "--output-len", "500",
                 "--tpot-slo-ms", "40", "--json"])
    record = json.loads(capsys.readouterr().out)[0]
    assert code == 0 and record["decode_gpu"] == "h200" and record["kv_transfer_ms"] > 0
    assert main(["estimate", "--model", "llama-3.1-70b", "--prefill-gpu", "h100-sxm"]) == 2
    assert "needs --gpu (the decode pool)" in capsys.readouterr().err


@given(st.floats(0.0, 1e4), st.floats(0.1, 1e3))
def test_md1_max_utilization_inverts_the_mean_wait(slack_ms, service_ms):
    from fleetplan.sweeps.queueing import md1_max_utilization, md1_wait_ms

    rho = md1_max_utilization(slack_ms, service_ms)
    assert 0.0 <= rho < 1.0
    assert float(md1_wait_ms(rho, service_ms)) == pytest.approx(slack_ms, rel=1e-9, abs=1e-9)


def test_a_ttft_slo_limits_the_prefill_pool_by_its_queue():
    free = disaggregated(pair()).iloc[0]
    fixed_ms = free["ttft_ms"]  # prefill + transfer + first decode step, no queueing
    work_ms = 1e3 / free["prefill_req_s"]
    slo_ms = fixed_ms + work_ms  # slack of one service time: rho = 2 / 3
    queued = disaggregated(pair(ttft_slo_ms=slo_ms)).iloc[0]
    assert queued["prefill_req_s"] == pytest.approx(free["prefill_req_s"] * 2 / 3)
    assert queued["ttft_ms"] == pytest.approx(slo_ms)  # the mean wait uses the slack exactly
    knee = disaggregated(pair(ttft_slo_ms=slo_ms), capacity_model="knee").iloc[0]
    assert knee["prefill_req_s"] == pytest.approx(free["prefill_req_s"]) and knee["ttft_ms"] == fixed_ms
    # an idle prefill replica paid while it waits: the prefill share of the cost grows by 3/2
    assert queued["usd_per_k_requests"] > free["usd_per_k_requests"]
    late = disaggregated(pair(ttft_slo_ms=fixed_ms * 0.99)).iloc[0]
    assert not late["valid"] and late["prefill_req_s"] == 0
    assert late["reason"] == f"TTFT SLO {fixed_ms * 0.99:g} ms is below the best achievable {fixed_ms:.1f} ms on idle pools"
    with pytest.raises(InvalidValueError, match="capacity_model must be one of load, knee, got 'fluid'"):
        disaggregated(pair(), capacity_model="fluid")


def test_cli_passes_the_ttft_slo_to_the_prefill_pool(capsys):
    import json

    from fleetplan.cli import main

    base = ["estimate", "--model", "llama-3.1-70b", "--quant", "fp8", "--gpu", "h200", "--tp", "2",
            "--prefill-gpu", "h100-sxm", "--prefill-tp", "2", "--input-len", "6000", "--output-len", "300",
            "--tpot-slo-ms", "50", "--json"]
    assert main(base) == 0
    free = json.loads(capsys.readouterr().out)[0]
    assert main([*base, "--ttft-slo-ms", "3000"]) == 0
    limited = json.loads(capsys.readouterr().out)[0]
    assert limited["ttft_ms"] == pytest.approx(3000) and limited["prefill_req_s"] < free["prefill_req_s"]
