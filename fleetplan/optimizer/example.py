"""The built-in example scenario: what ``fleetplan example`` prints and ``fleetplan plan`` runs
when no scenario is given."""

from __future__ import annotations

import yaml

from fleetplan.optimizer.scenario import Scenario
from fleetplan.optimizer.scenario_files import validate_scenario

EXAMPLE_YAML = """\
# fleetplan scenario: the cheapest GPU fleet that serves these workloads within their SLOs.
# Run it with `fleetplan plan this-file.yaml -o plan.xlsx`; `fleetplan schema` prints the
# JSON Schema (point your editor at it for completion and checks).
name: example-assistant-and-rag
description: An 8B chat assistant, a 70B RAG service and nightly summaries on one fleet.

workloads:
  - name: chat                     # interactive assistant
    model: llama-3.1-8b            # id from the models catalog (`fleetplan catalog models`)
    requests_per_s: 120            # mean over the day; the hourly profile shapes it
    input_tokens: 1200             # mean prompt length
    output_tokens: 350             # mean answer length
    tpot_slo_ms: 40                # time per output token, at the knee batch
    ttft_slo_ms: 1500              # time to first token
    quants: [bf16, fp8]            # quantizations the team accepts
    redundancy_k: 1                # keep one spare replica (N+1)
    # relative demand per hour of the day (UTC), normalized to mean 1; or a CSV file path.
    # Hours with equal values are solved as one period: a stepped profile solves fastest.
    hourly_profile: [0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 1.0, 1.0, 1.0, 1.5, 1.5,
                     1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.0, 1.0, 1.0, 1.0, 0.6, 0.6]

  - name: rag                      # retrieval-augmented answers: long prompts
    model: llama-3.1-70b
    tokens_per_month: 6.0e+10      # prompt + output tokens per month (token_basis: total)
    histogram:                     # request sizes as weighted buckets
      - {input_tokens: 2000, output_tokens: 300, weight: 0.6}
      - {input_tokens: 6000, output_tokens: 500, weight: 0.4}
    tpot_slo_ms: 60
    ttft_slo_ms: 4000
    quants: [fp8]
    monthly_growth: 0.0            # e.g. 0.05 for +5 % per month
    hourly_profile: [0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 1.0, 1.0, 1.0, 1.5, 1.5,
                     1.5, 1.5, 1.5, 1.5, 1.5, 1.5, 1.0, 1.0, 1.0, 1.0, 0.6, 0.6]

  - name: summaries                # batch-like, loose latency
    model: llama-3.1-8b
    requests_per_s: 12
    input_tokens: 5000
    output_tokens: 400
    tpot_slo_ms: 100

fleet:
  gpus:                            # ids from the gpus catalog
    - id: h100-sxm
      max_gpus: 48                 # availability cap at any time
      usd_per_gpu_hour: {reserved_1y: 2.10}   # our 1-year quote; other prices: catalog
    - id: a100-80gb-sxm
      usd_per_gpu_hour: {reserved_1y: 1.25}
    - id: l40s
      usd_per_gpu_hour: {reserved_1y: 0.60}
    - l4                           # on-demand only (no reserved quote)
  tp: [1, 2, 4, 8]                 # tensor-parallel degrees to consider
  pricing: [on_demand, reserved_1y]  # also: spot (see spot_max_share), reserved_3y
  # provider: aws                  # take catalog prices from one provider (and region)
  target_utilization: 0.8          # plan replicas at 80 % of their capacity
  whole_nodes: false               # true: buy GPUs in nodes of gpus_per_node
  # budget_usd_per_month: 60000
  # disaggregation:                # also offer prefill/decode pairs (prompts on one GPU type,
  #   prefill_gpus: [h100-sxm]     # generation on another, KV cache moved between them)
  #   decode_gpus: [l40s, a100-80gb-sxm]
  horizon_months: 12
  hours_per_month: 730

solver:
  time_limit_s: 60
  mip_gap: 0.005                   # stop within 0.5 % of the best possible cost

what_if:
  enabled: true                    # price binding limits and a 1.5x looser TPOT by re-solving
  tpot_slo_factor: 1.5
"""


def example_data() -> dict:
    """The example scenario as a plain mapping."""
    return yaml.safe_load(EXAMPLE_YAML)


def example_scenario() -> Scenario:
    """The example scenario, validated."""
    return validate_scenario(example_data(), source="example scenario")
