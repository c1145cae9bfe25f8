"""Nodes needed to hold replicas: the table form (all groups at once, used by the rounding and
the plan check) against the packing of one group at a time."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fleetplan.optimizer.node_packing import nodes_needed, nodes_needed_table
from fleetplan.optimizer.plan_checks import PlanView, check_node_cover
from tests.optimizer.instances import make_problem

KEYS = ["gpu", "period"]


def table(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=[*KEYS, "tp", "replicas", "node_gpus"])


@pytest.mark.parametrize(("counts", "node_gpus", "expected"), [
    ({3: 5}, 8, 3),  # no chain: two TP-3 replicas per 8-GPU node
    ({1: 3, 2: 2}, 8, 1),
    ({16: 4}, 72, 1),  # 64 of a 72-GPU domain
    ({2: 3, 4: 1}, 4, 3),  # a TP-4 replica fills a node; three TP-2 need two more
    ({2: 3}, 1, 6),  # bought GPU by GPU
])
def test_known_packings(counts, node_gpus, expected):
    rows = table([("g", 0, tp, n, node_gpus) for tp, n in counts.items()])
    assert nodes_needed(counts, node_gpus) == expected
    assert nodes_needed_table(rows, KEYS).loc[("g", 0)] == expected


groups = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 1),
                            st.sampled_from([1, 2, 3, 4, 8, 16]), st.integers(0, 6)),
                  min_size=1, max_size=12)


@settings(max_examples=60)
@given(groups, st.sampled_from([1, 4, 8, 72]), st.sampled_from([1, 8]))
@example([("a", 0, 3, 5)], 8, 8)
@example([("a", 0, 2, 1), ("a", 0, 3, 1), ("b", 1, 4, 2)], 8, 4)
def test_the_table_packs_every_group_as_one_group_alone(rows, node_a, node_b):
    # a replica never spans nodes (candidates cap TP at the node's size), except on GPUs
    # bought one at a time
    node_gpus = {"a": node_a, "b": node_b}
    frame = table([(g, t, tp, n, node_gpus[g]) for g, t, tp, n in rows
                   if node_gpus[g] == 1 or tp <= node_gpus[g]])
    needed = nodes_needed_table(frame, KEYS)
    for (gpu, period), group in frame.groupby(KEYS):
        counts = group.groupby("tp")["replicas"].sum().to_dict()
        expected = nodes_needed(counts, node_gpus[gpu])
        assert needed.get((gpu, period), 0) == expected


def test_the_plan_check_names_each_period_short_of_nodes():
    # five TP-3 replicas need three 8-GPU nodes; two were bought; GPUs bought one at a time
    # (g1) are never short
    problem = make_problem([[1.0], [1.0]], [[1.0], [1.0]], {("g0", "on_demand"): 1.0,
                                                          ("g1", "on_demand"): 1.0},
                           tp=[3, 1], gpus_per_node={"g0": 8})
    replicas = pd.DataFrame({"config": ["c0", "c0", "c1"], "pricing_type": "on_demand",
                             "period": [0, 1, 0], "replicas": [5.0, 2.0, 9.0],
                             "gpu": ["g0", "g0", "g1"], "tp": [3, 3, 1], "pool": "p"})
    nodes = pd.DataFrame({"gpu": ["g0", "g1"], "pricing_type": "on_demand",
                          "nodes_peak": [2.0, 1.0]})
    view = PlanView(problem, replicas, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), True,
                    nodes=nodes)
    assert check_node_cover(view) == ["nodes: g0/on_demand in period 0 needs 3 nodes, 2 bought"]
