"""Adversarial cases that still fail, each with the reason; marked strict xfail at collection, so a
case that starts passing fails the run until its entry here is removed."""

from __future__ import annotations

import pytest

_CACHE = "the what-if cache is keyed by the case's values only, and a damaged entry raises"

#: (node id inside tests/adversarial, or its start; reason)
KNOWN_GAPS: tuple[tuple[str, str, bool], ...] = (
    ("test_hostile_numbers.py::test_one_infinite_whatif_value_fails_only_its_own_case",
     "what-if case values are not validated per case", True),
    ("test_python_api.py::test_optimize_problem_checks_its_tables",
     "optimize_problem does not check its capacity, demand and price arrays", True),
    ("test_messages.py::test_unknown_names_on_the_command_line[args4-", "no did-you-mean for --engine", True),
    ("test_messages.py::test_unknown_names_in_a_scenario[<lambda>-fleet\\\\.engine",
     "no did-you-mean for fleet.engine", True),
    ("test_messages.py::test_unknown_whatif_axis_gets_did_you_mean", "no did-you-mean for what-if axes", True),
    ("test_messages.py::test_unknown_whatif_gpu_in_an_axis", "GPU ids in what-if axes are not checked", True),
    ("test_stale_state.py::test_an_edited_base_scenario_is_solved_again", _CACHE, True),
    ("test_stale_state.py::test_edited_catalogs_are_solved_again", _CACHE, True),
    ("test_stale_state.py::test_a_damaged_cache_entry_is_solved_again_and_reported", _CACHE, True),
)


def mark_known_gaps(items) -> None:
    """Mark every collected adversarial case listed in :data:`KNOWN_GAPS` as a strict xfail."""
    for item in items:
        local = item.nodeid.split("tests/adversarial/", 1)[-1]
        for start, reason, run in KNOWN_GAPS:
            if local.startswith(start):
                item.add_marker(pytest.mark.xfail(strict=True, reason=reason, run=run))
                break
