"""The load model's decode batch on the example plan's candidates: how many passes the fixed
point takes, and how far plain passes ``B <- f(B)`` stop from it.

``queueing.least_fixed_batch`` (safeguarded Newton passes) is compared with the textbook
iteration from ``B = 0`` run for a fixed number of passes (60 was the load model's count before
the Newton passes; 3,000 passes stand for the converged answer). Prints, for the candidates
``fleetplan plan`` prepares for the built-in example (their ``req_s_per_replica``, the largest
rate meeting the SLOs):

- the passes ``least_fixed_batch`` took per call (min-max over the bisection's calls, each
  begun from the batch of the bracket's lower rate) and in all;
- the largest relative difference from 3,000 plain passes, and the rows beyond 1e-6, of the
  Newton passes and of 60 plain passes;
- the time to prepare the candidates each way (best of ``--repeat``).

Usage: python benchmarks/bench_load_model.py [--repeat N]
"""

from __future__ import annotations

import argparse
import time
from contextlib import contextmanager

import numpy as np

from fleetplan.catalogs import load_catalogs
from fleetplan.optimizer.example import example_scenario
from fleetplan.optimizer.scenario_planning import prepare
from fleetplan.sweeps import queueing

NEWTON = queueing.least_fixed_batch


def plain_passes(passes: int):
    """The textbook iteration ``B <- min(load * step_ms(B), limit)`` from 0, ``passes`` times
    (the bisection's start, a lower rate's batch, is not used)."""
    def solve(step_ms, load, limit, start=0.0):
        batch = np.zeros(np.broadcast_shapes(np.shape(load), np.shape(limit)))
        for _ in range(passes):
            batch = np.minimum(load * step_ms(batch), limit)
        return batch
    return solve


@contextmanager
def batch_solver(solver):
    queueing.least_fixed_batch = solver
    try:
        yield
    finally:
        queueing.least_fixed_batch = NEWTON


def capacities(catalogs, repeat: int) -> tuple[np.ndarray, float]:
    """req_s_per_replica of the example's candidates, and the best time to prepare them [s]."""
    best, rates = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        rates = prepare(example_scenario(), catalogs).candidates["req_s_per_replica"].to_numpy(float)
        best = min(best, time.perf_counter() - started)
    return rates, best


def counted_newton(counts: list[int]):
    def solve(step_ms, load, limit, start=0.0):
        calls = [0]

        def step(batch):
            calls[0] += 1
            return step_ms(batch)
        result = NEWTON(step, load, limit, start)
        counts.append(calls[0])
        return result
    return solve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing (best is shown)")
    arguments = parser.parse_args()
    catalogs = load_catalogs()
    counts: list[int] = []
    with batch_solver(counted_newton(counts)):
        capacities(catalogs, 1)
    newton, newton_s = capacities(catalogs, arguments.repeat)
    with batch_solver(plain_passes(60)):
        sixty, sixty_s = capacities(catalogs, arguments.repeat)
    with batch_solver(plain_passes(3000)):
        converged, _ = capacities(catalogs, 1)
    print(f"{len(newton)} candidates; Newton passes per call: {min(counts)}-{max(counts)} "
          f"({len(counts)} calls, {sum(counts)} passes in all)")
    for label, rates, seconds in (("Newton passes", newton, newton_s),
                                  ("60 plain passes", sixty, sixty_s)):
        error = np.abs(rates - converged) / np.maximum(np.abs(converged), 1e-9)
        print(f"{label}: largest difference from 3,000 plain passes {np.nanmax(error):.3%}, "
              f"{int((error > 1e-6).sum())} rows beyond 1e-6; candidates prepared in "
              f"{seconds:.2f} s (best of {arguments.repeat})")


if __name__ == "__main__":
    main()
