"""Planning with prefill/decode pairs: candidate evaluation and solve time, pairs vs colocated.

Two workloads (long-prompt RAG on llama-3.1-70b, chat on llama-3.1-8b, each with a 3-bucket
request histogram) on H100 SXM, H200 and L40S at TP 1, 2, 4 and 8, 24 hourly periods: every
(prefill GPU, TP) x (decode GPU, TP) pair is a candidate next to the colocated replicas. Prints
the candidate table size, the time to evaluate it (one vectorized engine call per kind), the
solve time and gap, and the monthly cost with and without pairs. Run:

    python benchmarks/bench_disaggregated_plan.py
"""

from __future__ import annotations

import time
import warnings

from fleetplan.optimizer.scenario_files import validate_scenario
from fleetplan.optimizer.scenario_planning import plan_scenario, prepare

HOURLY = [0.5] * 8 + [1.5] * 8 + [1.0] * 8


def scenario(disaggregation: bool):
    fleet = {"gpus": ["h100-sxm", "h200", "l40s"], "tp": [1, 2, 4, 8]}
    if disaggregation:
        fleet["disaggregation"] = {}
    return validate_scenario({
        "name": "disaggregation benchmark", "what_if": {"enabled": False},
        "solver": {"time_limit_s": 60, "mip_gap": 0.005},
        "workloads": [
            {"name": "rag", "model": "llama-3.1-70b", "requests_per_s": 20, "quants": ["fp8"],
             "tpot_slo_ms": 50, "ttft_slo_ms": 3000, "hourly_profile": HOURLY,
             "histogram": [{"input_tokens": 2000, "output_tokens": 200, "weight": 1},
                           {"input_tokens": 6000, "output_tokens": 300, "weight": 2},
                           {"input_tokens": 12000, "output_tokens": 400, "weight": 1}]},
            {"name": "chat", "model": "llama-3.1-8b", "requests_per_s": 60, "quants": ["fp8"],
             "tpot_slo_ms": 30, "ttft_slo_ms": 1000, "hourly_profile": HOURLY,
             "histogram": [{"input_tokens": 500, "output_tokens": 200, "weight": 2},
                           {"input_tokens": 1500, "output_tokens": 400, "weight": 1},
                           {"input_tokens": 4000, "output_tokens": 300, "weight": 1}]}],
        "fleet": fleet})


def main() -> None:
    warnings.simplefilter("ignore", DeprecationWarning)  # PuLP's own notices
    for paired in (False, True):
        label = "with pairs" if paired else "colocated only"
        started = time.perf_counter()
        prepared = prepare(scenario(paired))
        candidates_s = time.perf_counter() - started
        table = prepared.candidates
        started = time.perf_counter()
        plan = plan_scenario(scenario(paired))
        total_s = time.perf_counter() - started
        stages = table["stage"].value_counts().to_dict()
        print(f"{label}: {len(table):,} candidate rows ({stages}), {table['config'].nunique():,} "
              f"configurations; candidates {candidates_s:.2f} s; plan {total_s:.2f} s (solve "
              f"{plan.solve_seconds:.2f} s), status {plan.status}, gap {plan.gap:.3%}, "
              f"${plan.usd_per_month:,.0f}/month")


if __name__ == "__main__":
    main()
