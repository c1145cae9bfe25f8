"""Prefill/decode disaggregation: pool capacities, KV transfer and cost per request."""

import pandas as pd
import pytest

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
