"""Closed-loop concurrency: the analytic model against a discrete-event simulation of the engine.

The simulation runs the engine iteration by iteration over the same step-time function
(``step_times.stage_step``): N clients each send a fixed-length request as soon as their last
one finished; the engine admits up to its cap, spends each iteration's token budget on one
decode token per running sequence first and prompt chunks (FIFO) with the rest, and a request's
first token comes out of the iteration that finishes its prompt. Throughput is output tokens
over the run's duration and TPOT each request's (end - first token) / (G - 1), as
``vllm bench serve`` computes them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fleetplan.sweeps import estimate_cases, operating_points, step_times
from fleetplan.sweeps.concurrency import closed_loop, cohort_size
from fleetplan.sweeps.estimate import case_arrays


def simulate(c, cap: int, input_len: int, output_len: int, clients: int, requests: int) -> dict:
    """Discrete-event closed-loop run; ``c`` the constants of one configuration (arrays of one)."""
    budget = float(c.max_batched_tokens[0])
    chunked = c.chunked_prefill[0] > 0
    waiting = list(range(min(clients, requests)))  # request ids queued for admission
    issued, now = len(waiting), 0.0
    starts = dict.fromkeys(waiting, 0.0)
    state = {}  # id -> [prompt tokens done, output tokens, first token time]
    running: list[int] = []
    done_tokens, tpots, ttfts = 0, [], []
    while running or waiting:
        while waiting and len(running) < cap:
            rid = waiting.pop(0)
            running.append(rid)
            state[rid] = [0, 0, None]
        decoding = [r for r in running if state[r][0] >= input_len]
        left = budget - len(decoding)
        chunks = {}
        for r in running:
            remaining = input_len - state[r][0]
            if remaining <= 0 or left <= 0:
                continue
            take = min(remaining, left) if chunked else (remaining if remaining <= left or not chunks else 0)
            if take > 0:
                chunks[r] = take
                left -= take
        context = np.mean([input_len + state[r][1] for r in decoding]) if decoding else 0.0
        pairs = sum(float(step_times.prompt_pair_layers(c, state[r][0] + t, state[r][0])[0]) for r, t in chunks.items())
        stage = step_times.stage_step(c, float(len(decoding)), context, float(sum(chunks.values())), pairs, float(len(chunks)))
        now += float(stage.step_ms[0])
        for r in decoding:
            state[r][1] += 1
            done_tokens += 1
        for r, take in chunks.items():
            state[r][0] += take
            if state[r][0] >= input_len:  # the prompt's last chunk emits the first token
                state[r][1], state[r][2] = 1, now
                done_tokens += 1
                ttfts.append(now - starts[r])
        for r in [r for r in running if state[r][1] >= output_len]:
            running.remove(r)
            tpots.append((now - state[r][2]) / (output_len - 1))
            if issued < requests:
                waiting.append(issued)
                starts[issued] = now
                issued += 1
    return {"output_tok_s": done_tokens / now * 1e3, "tpot_ms": float(np.mean(tpots)), "ttft_ms": float(np.mean(ttfts))}


CASES = [  # (engine, model, tp, max_num_seqs, input_len, output_len, clients)
    ("vllm", "llama-3.1-8b", 1, 256, 128, 256, 8),
    ("vllm", "llama-3.1-8b", 1, 256, 128, 256, 64),
    ("vllm", "llama-3.1-8b", 1, 256, 1024, 128, 32),
    ("vllm", "llama-3.1-8b", 1, 256, 2000, 200, 128),
    ("vllm", "llama-3.1-8b", 1, 16, 512, 256, 64),  # a cap below the clients: a queue
    ("vllm", "llama-3.1-8b", 1, 256, 4000, 50, 256),  # prompts fill every iteration's budget
    ("tensorrt-llm", "llama-3.1-8b", 1, 256, 1024, 128, 32),  # whole prompts only
    ("vllm", "llama-3.1-70b", 4, 256, 512, 512, 32),
    ("vllm", "llama-3.1-70b", 4, 64, 1000, 100, 128),
    ("vllm", "llama-3.1-70b", 4, 1024, 256, 64, 512),
]


@pytest.mark.slow
@pytest.mark.parametrize(("engine", "model", "tp", "cap", "input_len", "output_len", "clients"), CASES)
def test_closed_loop_matches_a_discrete_event_simulation(engine, model, tp, cap, input_len, output_len, clients):
    cases = pd.DataFrame([{"gpu": "h100-sxm", "model": model, "quant": "fp8", "tp": tp, "input_len": input_len,
                           "output_len": output_len, "engine": engine, "max_num_seqs": cap}])
    _, _, c, rows = case_arrays(cases)
    requests = 6 * clients
    simulated = simulate(c, int(operating_points.batch_cap(c, rows)[0]), input_len, output_len, clients, requests)
    model_ = closed_loop(c, rows, clients, requests)
    assert model_["req_s"][0] * output_len == pytest.approx(simulated["output_tok_s"], rel=0.05)
    assert model_["tpot_ms"][0] == pytest.approx(simulated["tpot_ms"], rel=0.05)
    assert model_["ttft_ms"][0] == pytest.approx(simulated["ttft_ms"], rel=0.15)


def test_cohorts_share_one_budgeted_iteration():
    assert cohort_size(8192, 64, 1000) == pytest.approx((8192 - 64) / 999)
    assert cohort_size(8192, 64, 1000, chunked=False) == 8  # whole prompts only
    assert cohort_size(8192, 16, 100) == 16  # every prompt of the run in one iteration
    assert cohort_size(2048, 8, 4000) == 1  # one prompt spans several iterations


def test_concurrency_mode_of_estimate_cases_reports_what_the_client_sees():
    case = {"gpu": "h100-sxm", "model": "llama-3.1-8b", "quant": "fp8", "tp": 1, "input_len": 1000, "output_len": 200}
    low, high = estimate_cases(pd.DataFrame([{**case, "concurrency": 4}, {**case, "concurrency": 256}])).itertuples()
    assert low.mode == "concurrency" and low.concurrency == 4 and low.batch == 4
    assert high.output_tok_s > 5 * low.output_tok_s  # batching, though prompts take much of the time
    assert high.tpot_ms > low.tpot_ms and high.ttft_ms > low.ttft_ms
    for row in (low, high):
        assert row.tpot_p90_ms >= row.tpot_ms and row.ttft_p99_ms >= row.ttft_p90_ms >= row.ttft_ms
        assert row.req_s == pytest.approx(row.output_tok_s / 200)
