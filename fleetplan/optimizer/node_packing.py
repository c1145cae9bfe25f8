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
