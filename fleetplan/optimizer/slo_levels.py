"""SLO levels: the latency a shared replica runs at when it serves several workloads.

Every request in a batch sees the same step time, so a replica that serves workloads with
different SLOs must meet the tightest of them for all its requests. The rule:

- a pool's *levels* are its workloads' (TPOT, TTFT) SLO pairs, closed under the componentwise
  minimum (two workloads with SLOs (40 ms, none) and (60 ms, 2 s) share at (40 ms, 2 s));
- a workload may be served at every level no looser than its own SLO (each metric at most its
  SLO; a missing SLO is no limit), at the capacity its requests have under that level;
- each level of a configuration is a configuration of its own (``<config>@<level>``), so its
  replicas only ever carry requests whose SLOs it meets. A pool with one level keeps plain ids.

With measured capacity profiles (no model to evaluate other SLOs) every workload is served at
its own level only: workloads share replicas only with workloads of the same SLOs.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

#: Most levels kept per pool (the tightest first); more SLO classes than this are not shared
#: beyond their own level.
MAX_LEVELS = 8


def level_label(tpot_slo_ms: float, ttft_slo_ms: float) -> str:
    """``tpot40ms+ttft1500ms``, ``tpot40ms``, ``ttft2000ms`` or ``no-slo``.

    >>> level_label(40.0, math.nan), level_label(40.0, 1500.0), level_label(math.nan, math.nan)
    ('tpot40ms', 'tpot40ms+ttft1500ms', 'no-slo')
    """
    parts = [f"{name}{value:g}ms" for name, value in (("tpot", tpot_slo_ms),
                                                      ("ttft", ttft_slo_ms))
             if not math.isnan(value)]
    return "+".join(parts) or "no-slo"


def _closure(pairs: set[tuple[float, float]]) -> list[tuple[float, float]]:
    """Pairs closed under the componentwise minimum (inf = no SLO), tightest first."""
    levels = set(pairs)
    while True:
        more = {(min(a[0], b[0]), min(a[1], b[1])) for a, b in itertools.combinations(levels, 2)}
        if more <= levels:
            return sorted(levels)[:MAX_LEVELS]
        levels |= more


def slo_levels(workloads: pd.DataFrame, *, shared: bool = True) -> pd.DataFrame:
    """The levels each workload may be served at.

    ``workloads``: workload, pool, tpot_slo_ms, ttft_slo_ms (NaN = no SLO). Returns workload,
    level (``@label``, empty when the pool has one level), tpot_slo_ms, ttft_slo_ms (the
    level's). ``shared=False`` keeps every workload at its own level (measured profiles).
    """
    slo = workloads.assign(tpot=workloads["tpot_slo_ms"].astype(float).fillna(np.inf),
                           ttft=workloads["ttft_slo_ms"].astype(float).fillna(np.inf))
    rows = []
    for _, pool in slo.groupby("pool", sort=False):
        own = list(zip(pool["tpot"], pool["ttft"], strict=True))
        levels = _closure(set(own)) if shared else sorted(set(own))
        labelled = len(levels) > 1
        for workload, mine in zip(pool["workload"], own, strict=True):
            for level in levels:
                if level[0] <= mine[0] and level[1] <= mine[1] and (shared or level == mine):
                    tpot, ttft = (math.nan if math.isinf(v) else v for v in level)
                    label = f"@{level_label(tpot, ttft)}" if labelled else ""
                    rows.append((workload, label, tpot, ttft))
    return pd.DataFrame(rows, columns=["workload", "level", "tpot_slo_ms", "ttft_slo_ms"])
