"""Packing replicas into whole nodes: how many nodes a mix of replica sizes needs.

A replica of TP degree tau occupies tau GPUs of one node (tensor parallelism stays inside a
node). Counting GPUs alone (sum tau y <= s n for nodes of s GPUs) is exact only when replicas
pack perfectly; TP 3 on 8-GPU nodes leaves 2 GPUs idle per node, TP 16 on a 72-GPU domain 8.

Two exact formulations, by the sizes present on a GPU type:

- sizes that form a divisibility chain (1, 2, 4, 8, 16; each divides the next): for every size
  tau, the replicas of size >= tau fit in the part of each node they can fill,
  ``sum_{tau' >= tau} tau' y_tau' <= tau floor(s / tau) n``. With divisible sizes every node's
  content of larger replicas is a multiple of tau, so packing largest first never strands room
  [1]; the conditions are then also sufficient.
- other mixes (3 and 2 on 8 GPUs): node patterns, the maximal ways to fill one node; z_p nodes
  filled with pattern p, ``y_tau <= sum_p a_{p,tau} z_p`` and ``n >= sum_p z_p``.

References:
    [1] E. G. Coffman, M. R. Garey, D. S. Johnson, "Bin packing with divisible item sizes",
        Journal of Complexity 3 (1987) 406-428.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from scipy.optimize import LinearConstraint, milp

#: Most node patterns enumerated for one GPU type; beyond, each node holds one replica size.
MAX_PATTERNS = 64


def is_chain(sizes: list[int]) -> bool:
    """True when each size divides the next (sizes ascending).

    >>> is_chain([1, 2, 4, 8]), is_chain([2, 3])
    (True, False)
    """
    return all(b % a == 0 for a, b in itertools.pairwise(sizes))


def chain_capacity(size: int, node_gpus: int) -> int:
    """GPUs of one node that replicas of ``size`` GPUs or larger (multiples of it) can fill.

    >>> chain_capacity(16, 72), chain_capacity(1, 8)
    (64, 8)
    """
    return size * (node_gpus // size)


def patterns(sizes: list[int], node_gpus: int) -> list[dict[int, int]]:
    """Maximal fillings of one node (no further replica fits), as {size: count}.

    >>> patterns([2, 3], 8)
    [{2: 1, 3: 2}, {2: 2, 3: 1}, {2: 4, 3: 0}]
    """
    found: list[dict[int, int]] = []

    def fill(index: int, room: int, chosen: dict[int, int]) -> None:
        if len(found) > MAX_PATTERNS:
            return
        if index == len(sizes):
            if all(room < size for size in sizes):
                found.append(dict(chosen))
            return
        size = sizes[index]
        for count in range(room // size, -1, -1):
            fill(index + 1, room - count * size, {**chosen, size: count})

    fill(0, node_gpus, {})
    if len(found) > MAX_PATTERNS:  # too many mixes: a node holds one size
        return [{s: (node_gpus // s if s == t else 0) for s in sizes} for t in sizes]
    return sorted(found, key=lambda p: [p[s] for s in sizes])


def nodes_needed(counts: dict[int, float], node_gpus: int) -> int:
    """Fewest nodes of ``node_gpus`` GPUs that hold ``counts[size]`` replicas of each size.

    >>> nodes_needed({3: 5}, 8), nodes_needed({1: 3, 2: 2}, 8), nodes_needed({16: 4}, 72)
    (3, 1, 1)
    """
    sizes = sorted(s for s, c in counts.items() if c > 0)
    if not sizes:
        return 0
    if node_gpus == 1:  # bought GPU by GPU
        return int(sum(s * counts[s] for s in sizes))
    if is_chain(sizes):
        return max(math.ceil(sum(t * counts[t] for t in sizes if t >= s)
                             / chain_capacity(s, node_gpus) - 1e-9) for s in sizes)
    fills = patterns(sizes, node_gpus)
    matrix = np.array([[p[s] for p in fills] for s in sizes], dtype=float)
    result = milp(np.ones(len(fills)), integrality=np.ones(len(fills)),
                  constraints=LinearConstraint(matrix, lb=[counts[s] for s in sizes]))
    return round(result.fun)


def nodes_needed_table(counts: pd.DataFrame, keys: list[str]) -> pd.Series:
    """:func:`nodes_needed` for every group of ``keys`` of a table with columns ``keys``,
    ``tp`` [GPUs per replica], ``replicas`` and ``node_gpus`` [GPUs per node], indexed by
    ``keys``.

    A chain of sizes (each dividing the next) needs, for each size :math:`\\tau`, the GPUs of
    replicas of size :math:`\\ge \\tau` over the GPUs of a node such replicas can fill,
    rounded up; the largest of these counts, computed for all groups at once. A GPU bought
    one at a time (``node_gpus`` 1) needs one node per GPU. The rare group whose sizes are no
    chain is packed by :func:`nodes_needed`.
    """
    counts = counts[counts["replicas"] > 0]
    if counts.empty:
        return pd.Series(dtype=float, index=pd.MultiIndex.from_arrays([[]] * len(keys),
                                                                      names=keys))
    counts = counts.groupby([*keys, "tp"], as_index=False).agg(
        replicas=("replicas", "sum"), node_gpus=("node_gpus", "first"))
    counts = counts.sort_values([*keys, "tp"], ascending=[True] * len(keys) + [False])
    tp, node_gpus = counts["tp"].to_numpy(int), counts["node_gpus"].to_numpy(int)
    larger = (counts["replicas"] * counts["tp"]).groupby(
        [counts[k] for k in keys]).cumsum().to_numpy(float)
    capacity = np.where(node_gpus == 1, 1, np.maximum(tp * (node_gpus // tp), 1))
    counts["needed"] = np.ceil(larger / capacity - 1e-9)
    # sizes descending within each group: a chain when each divides the one before it
    larger_size = counts.groupby(keys)["tp"].shift(1)
    divides = larger_size.isna() | (larger_size.fillna(1) % counts["tp"] == 0)
    by_group = counts.assign(chain=divides | (counts["node_gpus"] == 1)).groupby(keys)
    needed, chain = by_group["needed"].max(), by_group["chain"].all()
    others = counts.set_index(keys)
    for key in needed.index[~chain.to_numpy(bool)]:
        group = others.loc[[key]]
        needed[key] = nodes_needed(dict(zip(group["tp"], group["replicas"])),
                                   int(group["node_gpus"].iloc[0]))
    return needed
