"""The portfolio benchmark: 5 models x 6 GPU types x 3 quantizations x 4 TP degrees = 360
configurations, 10 workloads (two per model, sharing its replicas), on-demand + spot (at most
30 % of GPUs) + 1-year reserved pricing, N+1 on half the workloads.

Three horizons, each solved in its own process (peak memory per case):

- ``day``: 24 hourly periods, a daily profile per workload (target: proven within 0.5 % in
  <= 10 s);
- ``week``: 168 hourly periods, daily profiles shaped by weekday (target: within 1 % of the
  dual bound in <= 60 s);
- ``year``: 12 monthly periods with 2-8 % monthly growth (target: within 1 % in <= 60 s);
- ``flexible``: the ``day`` portfolio with on-demand and spot pricing only: no reserved
  capacity links the hours, so each is solved on its own (the same target as ``day``);
- ``flexible_week``: the ``week`` portfolio with on-demand and spot pricing only (the same
  target as ``week``);
- ``stochastic``: the ``day`` portfolio under 3 demand scenarios (P10/P50/P90 factors 0.7, 1.0
  and 1.4 with probabilities 0.3/0.4/0.3): 72 periods, reserved capacity shared by all
  (target: within 1 % in <= 60 s); then the commitments table (7 options re-solved with their
  first stage fixed), timed apart.

Capacities are synthetic (decode-bound, a smooth function of model size, GPU speed and memory,
quantization and TP degree; configurations whose weights do not fit are unusable), so the
benchmark needs neither the performance engine nor the catalogs. The cases' problems and solve
are in ``portfolio_cases.py``, the diagnostics that show where a case's gap lies in
``portfolio_diagnostics.py``. Run:

    python benchmarks/bench_portfolio.py [--case day|week|year|flexible|flexible_week|stochastic]
        [--time-limit S] [--redundancy-k K] [--spot capped|uncapped|none] [--pool MODEL]
        [--fixed-reserved S | --fixed-by-period S | --lagrangian-gap G | --whole S
         | --pool-split S | --partial S | --pool-moves S]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from portfolio_cases import CASES, MODELS, SPOT, run_case
from portfolio_diagnostics import DIAGNOSTICS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=list(CASES), help="one case, in this process")
    parser.add_argument("--time-limit", type=float, help="seconds (default: the case's target)")
    parser.add_argument("--redundancy-k", type=int, default=1,
                        help="spare replicas of the N+k half of the workloads (default 1)")
    parser.add_argument("--spot", choices=SPOT, default="capped",
                        help="spot pricing: capped at 30%% of GPUs (default), uncapped, or none")
    parser.add_argument("--pool", choices=list(MODELS),
                        help="with --case: that model's pool alone (portfolio)")
    diagnostics = parser.add_mutually_exclusive_group()
    for name, (function, text) in DIAGNOSTICS.items():
        diagnostics.add_argument("--" + name.replace("_", "-"), type=float, metavar="S",
                                 help=f"with --case: {text}, instead ({function.__name__})")
    arguments = parser.parse_args()
    variant = {"redundancy_k": arguments.redundancy_k, "spot": arguments.spot}
    if arguments.case:
        variant["only_pool"] = arguments.pool
        for name, (diagnostic, _) in DIAGNOSTICS.items():
            if getattr(arguments, name):
                print(json.dumps(diagnostic(arguments.case, getattr(arguments, name),
                                            **variant)))
                return
        print(json.dumps(run_case(arguments.case, arguments.time_limit, **variant)))
        return
    for case in CASES:
        command = [sys.executable, __file__, "--case", case,
                   "--redundancy-k", str(arguments.redundancy_k), "--spot", arguments.spot]
        if arguments.time_limit:
            command += ["--time-limit", str(arguments.time_limit)]
        figures = json.loads(subprocess.run(command, check=True, capture_output=True,
                                            text=True).stdout.splitlines()[-1])
        verdict = "meets" if (figures["seconds"] <= figures["target_s"]
                              and figures["gap"] <= figures["target_gap"]) else "MISSES"
        print(f"{case}: {figures['status']}, gap {figures['gap']:.3%} against the bound "
              f"${figures['bound_usd_per_hour']:,.2f}/h, ${figures['usd_per_hour']:,.2f}/h, "
              f"{figures['seconds']:.1f} s (target {figures['target_s']:g} s within "
              f"{figures['target_gap']:.1%}: {verdict}), peak {figures['gpus_peak']:.0f} GPUs, "
              f"peak memory {figures['peak_rss_mb']:,.0f} MB (solver child "
              f"{figures['child_peak_rss_mb']:,.0f} MB){_risk_text(figures)}")


def _risk_text(figures: dict) -> str:
    if "commitments_seconds" not in figures:
        return ""
    return (f"; commitments table {figures['commitments_seconds']:.1f} s, VSS "
            f"${figures['vss_usd_per_hour']:,.2f}/h")


if __name__ == "__main__":
    main()
