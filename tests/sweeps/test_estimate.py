"""estimate_cases: operating modes, the knee against brute force, reasons and bad cases."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetplan.errors import InvalidValueError, UnknownNameError
from fleetplan.sweeps import estimate_cases, sweep
from fleetplan.sweeps.estimate import mean_context_len


def case(**values):
    base = {"gpu": "h100-sxm", "model": "llama-3.1-8b", "quant": "bf16", "tp": 1, "input_len": 1024,
            "output_len": 256}
    return pd.DataFrame([{**base, **values}])


def test_inputs_are_repeated_and_extra_columns_kept():
    cases = pd.concat([case(id="a", batch=8), case(id="b", tpot_slo_ms=30.0), case(id="c")], ignore_index=True)
    out = estimate_cases(cases)
    assert list(out["id"]) == ["a", "b", "c"]
    assert list(out["mode"]) == ["batch", "slo", "offline"]
    assert out["batch"].iloc[0] == 8
    assert out["batch"].iloc[2] == out["max_batch"].iloc[2]  # offline runs at the memory limit
    assert (out["valid"] & out["fits"]).all()


@settings(max_examples=20, deadline=None)
@given(slo=st.floats(5.0, 80.0), input_len=st.integers(16, 8000), output_len=st.integers(1, 4000),
       model=st.sampled_from(["llama-3.1-8b", "mixtral-8x7b"]), ttft=st.sampled_from([np.nan, 400.0]))
def test_knee_is_the_largest_batch_meeting_the_slos(slo, input_len, output_len, model, ttft):
    out = estimate_cases(case(model=model, quant="fp8", tp=2, input_len=input_len, output_len=output_len,
                              tpot_slo_ms=slo, ttft_slo_ms=ttft), max_num_seqs=2048).iloc[0]
    context = int(mean_context_len(input_len, output_len))
    grid = sweep(["h100-sxm"], [model], ["fp8"], tps=[2], contexts=[context], input_lens=[input_len],
                 output_lens=[output_len], batches=range(1, 2049))
    meets = (grid["tpot_ms"] <= slo) & (np.isnan(ttft) | (grid["ttft_ms"] <= ttft)) & grid["fits"]
    expected = int(grid.loc[meets, "batch"].max()) if meets.any() else 0
    assert out["batch"] == expected


def test_an_unreachable_slo_reports_the_best_achievable_latency():
    out = estimate_cases(case(model="llama-3.1-70b", tp=4, tpot_slo_ms=5.0)).iloc[0]
    assert out["batch"] == 0 and out["req_s"] == 0 and not out["valid"]
    assert out["reason"].startswith("TPOT SLO 5 ms is below the best achievable ")
    achievable = float(out["reason"].split()[-2])
    single = estimate_cases(case(model="llama-3.1-70b", tp=4, batch=1, input_len=1024, output_len=256)).iloc[0]
    assert achievable == pytest.approx(single["tpot_ms"], abs=0.05)


def test_ttft_slo_reason():
    out = estimate_cases(case(input_len=32000, ttft_slo_ms=10.0)).iloc[0]
    assert "TTFT SLO 10 ms is below the best achievable" in out["reason"]


def test_per_case_overrides_and_default_kv_quant():
    out = estimate_cases(pd.concat([case(batch=16), case(batch=16, mbu=0.9, usd_per_gpu_hour=1.0),
                                    case(batch=16, quant="fp8", kv_quant="")], ignore_index=True))
    assert out["tpot_ms"].iloc[1] < out["tpot_ms"].iloc[0]
    assert out["usd_per_hour"].iloc[1] == 1.0
    assert out["kv_quant"].iloc[2] == "fp8"


@pytest.mark.parametrize(("values", "error", "match"), [
    ({"gpu": "h10-sxm"}, UnknownNameError, "unknown gpu 'h10-sxm'; did you mean 'h100-sxm'"),
    ({"tp": 0}, InvalidValueError, r"cases row 1, column tp: must be a whole number >= 1"),
    ({"input_len": -5}, InvalidValueError, r"cases row 1, column input_len: must be a whole number >= 1"),
    ({"output_len": float("nan")}, InvalidValueError, r"cases row 1, column output_len"),
    ({"tpot_slo_ms": -1.0}, InvalidValueError, r"cases row 1, column tpot_slo_ms: must be a number > 0"),
    ({"batch": 2.5}, InvalidValueError, r"cases row 1, column batch: must be a whole number.*, got 2\.5$"),
    ({"batch": True}, InvalidValueError, r"cases row 1, column batch: must be a whole number.*, got True$"),
    ({"tp": True}, InvalidValueError, r"cases row 1, column tp: must be a whole number.*, got True$"),
    ({"mbu": True}, InvalidValueError, r"cases row 1, column mbu: must be a number > 0 and <= 1, got True$"),
    ({"mbu": "fast"}, InvalidValueError, r"cases row 1, column mbu: must be a number > 0 and <= 1, got 'fast'"),
    ({"mode": "turbo"}, InvalidValueError, r"cases row 1, column mode: must be one of batch, slo, offline"),
    ({"mode": "batch"}, InvalidValueError, r"cases row 1, column batch: mode 'batch' needs a batch"),
    ({"kv_quant": "int5"}, UnknownNameError, r"unknown quant 'int5'"),
    # two modes' columns and no mode: refused, as `fleetplan estimate --batch B --tpot-slo-ms T` is
    ({"batch": 16, "tpot_slo_ms": 3.0}, InvalidValueError,
     r"^cases row 1: give one of batch, tpot_slo_ms/ttft_slo_ms, rate_req_s or concurrency, "
     r"not batch and an SLO \(or name the row's mode: batch, slo, offline, rate, max_rate"),
    ({"rate_req_s": 2.0, "ttft_slo_ms": 100.0}, InvalidValueError, r"not rate_req_s and an SLO"),
    ({"batch": 4, "concurrency": 8}, InvalidValueError, r"not batch and concurrency"),
])
def test_bad_cases_raise_naming_row_and_column(values, error, match):
    with pytest.raises(error, match=match):
        estimate_cases(case(**values))


def test_a_named_mode_decides_which_columns_count():
    out = estimate_cases(pd.concat([case(batch=16, tpot_slo_ms=3.0, mode="batch"),
                                    case(tpot_slo_ms=30.0, rate_req_s=2.0, mode="max_rate")],
                                   ignore_index=True))
    assert list(out["mode"]) == ["batch", "max_rate"] and out["batch"].iloc[0] == 16


def test_missing_required_column_and_empty_table():
    with pytest.raises(InvalidValueError, match="cases lack the required column output_len"):
        estimate_cases(case().drop(columns=["output_len"]))
    with pytest.raises(InvalidValueError, match="cases must be a non-empty table"):
        estimate_cases(pd.DataFrame())


def test_rate_mode_reports_loaded_latency_and_tails():
    idle = estimate_cases(case(batch=1)).iloc[0]
    out = estimate_cases(pd.concat([case(rate_req_s=1e-6), case(rate_req_s=5.0), case(rate_req_s=1e6)],
                                   ignore_index=True))
    assert list(out["mode"]) == ["rate", "rate", "rate"]
    assert out["tpot_ms"].iloc[0] == pytest.approx(idle["tpot_ms"], rel=1e-6)
    assert out["tpot_ms"].iloc[1] > out["tpot_ms"].iloc[0]
    assert out["req_s"].iloc[1] == 5.0 and out["output_tok_s"].iloc[1] == 5.0 * 256
    assert (out["ttft_p99_ms"].iloc[:2] >= out["ttft_p90_ms"].iloc[:2]).all()
    assert out["utilization"].iloc[1] == pytest.approx(5.0 / out["capacity_req_s"].iloc[1])
    assert not out["valid"].iloc[2] and "is at or beyond the capacity" in out["reason"].iloc[2]


def test_max_rate_mode_meets_the_slos_at_the_largest_rate():
    out = estimate_cases(case(model="llama-3.1-70b", tp=4, tpot_slo_ms=30.0, ttft_slo_ms=400.0,
                              mode="max_rate")).iloc[0]
    assert out["rate_req_s"] > 0 and out["valid"]
    assert out["tpot_ms"] <= 30.0 + 1e-6 and out["ttft_ms"] <= 400.0 + 1e-6
    faster = estimate_cases(case(model="llama-3.1-70b", tp=4, tpot_slo_ms=30.0, ttft_slo_ms=400.0,
                                 mode="max_rate", rate_req_s=np.nan)).iloc[0]
    assert faster["rate_req_s"] == pytest.approx(out["rate_req_s"])
    with pytest.raises(InvalidValueError, match="mode 'max_rate' needs a tpot_slo_ms"):
        estimate_cases(case(mode="max_rate"))
    with pytest.raises(InvalidValueError, match="mode 'rate' needs a rate_req_s"):
        estimate_cases(case(mode="rate"))
