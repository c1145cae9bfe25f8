"""Adversarial cases that still fail, each with the reason; marked strict xfail at collection, so a
case that starts passing fails the run until its entry here is removed."""

from __future__ import annotations

import pytest

_NUMBERS = "scenario fields have no upper bound and accept inf (no finite check before the solver)"
_SANITIZER = "plan/compare CSV, XLSX and JSON outputs and `catalog show --format csv` do not sanitize user text"
_CACHE = "the what-if cache is keyed by the case's values only, and a damaged entry raises"

#: (node id inside tests/adversarial, or its start; reason)
KNOWN_GAPS: tuple[tuple[str, str, bool], ...] = (
    *((f"test_hostile_numbers.py::test_scenario_numbers_are_checked_at_the_edge[{case}]", _NUMBERS, True)
      for case in ("price 1e300", "requests_per_s 1e30", "requests_per_s inf", "tokens_per_month inf",
                   "budget 1e300", "budget inf", "histogram weight inf", "max_gpus 1e30")),
    ("test_python_api.py::test_validate_scenario_of_non_finite_demand", _NUMBERS, True),
    ("test_hostile_numbers.py::test_estimate_options[extra1-", "estimate --tpot-slo-ms nan is not refused", True),
    ("test_hostile_numbers.py::test_compare_options[extra3-", "compare --demand-req-s has no upper bound", True),
    ("test_hostile_numbers.py::test_sweep_options[extra1-", "axis parsing has no length cap (not run: builds 1e8 values)", False),
    ("test_hostile_numbers.py::test_one_infinite_whatif_value_fails_only_its_own_case",
     "what-if case values are not validated per case", True),
    ("test_python_api.py::test_optimize_problem_checks_its_tables",
     "optimize_problem does not check its capacity, demand and price arrays", True),
    ("test_injection.py::test_plan_outputs_keep_a_hostile_scenario_name_as_text", _SANITIZER, True),
    ("test_injection.py::test_compare_outputs_keep_hostile_override_text_as_text", _SANITIZER, True),
    ("test_injection.py::test_catalog_show_csv_keeps_override_text_inert", _SANITIZER, True),
    ("test_messages.py::test_unknown_whatif_axis_gets_did_you_mean", "no did-you-mean for what-if axes", True),
    ("test_messages.py::test_unknown_whatif_gpu_in_an_axis", "GPU ids in what-if axes are not checked", True),
    ("test_stale_state.py::test_an_edited_base_scenario_is_solved_again", _CACHE, True),
    ("test_stale_state.py::test_edited_catalogs_are_solved_again", _CACHE, True),
    ("test_stale_state.py::test_a_damaged_cache_entry_is_solved_again_and_reported", _CACHE, True),
    # Not run: without a row limit these build grids of 1e8-1e9 rows and exhaust memory.
    ("test_resources.py::test_python_sweep_refuses_a_grid_larger_than_memory", "sweep has no max_rows limit", False),
    ("test_resources.py::test_python_sweep_limit_can_be_raised_on_purpose", "sweep has no max_rows limit", True),
    ("test_resources.py::test_an_axis_of_a_hundred_million_values_is_refused_before_it_is_built",
     "axis parsing has no length cap", False),
    ("test_resources.py::test_a_huge_grid_to_stdout_is_refused_or_streamed", "sweep has no row limit", False),
)


def mark_known_gaps(items) -> None:
    """Mark every collected adversarial case listed in :data:`KNOWN_GAPS` as a strict xfail."""
    for item in items:
        local = item.nodeid.split("tests/adversarial/", 1)[-1]
        for start, reason, run in KNOWN_GAPS:
            if local.startswith(start):
                item.add_marker(pytest.mark.xfail(strict=True, reason=reason, run=run))
                break
