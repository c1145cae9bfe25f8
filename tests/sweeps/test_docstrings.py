"""Every formula function documents its units, equation and reference (its example runs in
tests/cli/test_doctests.py)."""

import inspect

import pytest

from fleetplan.sweeps import (
    disaggregation,
    estimate,
    latency,
    levers,
    memory,
    queueing,
    step_times,
    throughput,
)

FORMULA_MODULES = (memory, latency, levers, throughput, queueing)
SECTIONS = ("Parameters", "Returns", "Notes", "References", "Examples")
HELPERS = {"safe_divide"}  # not a formula: NaN-safe division used by the formulas
KERNEL_COMPOSITIONS = {"capacity_req_s", "at_rate", "max_rate_under_slo"}  # documented in the module text


def formula_functions():
    functions = [(module, name, function) for module in FORMULA_MODULES
                 for name, function in inspect.getmembers(module, inspect.isfunction)
                 if function.__module__ == module.__name__ and not name.startswith("_")
                 and name not in HELPERS | KERNEL_COMPOSITIONS]
    extra = [(disaggregation, name, getattr(disaggregation, name)) for name in
             ("kv_transfer_ms", "decode_only_req_s", "prefill_replicas_per_decode_replica", "pair_usd_per_hour",
              "replica_usd_per_hour", "prefill_utilization")]
    extra += [(step_times, "first_token_ms", step_times.first_token_ms),
              (estimate, "mean_context_len", estimate.mean_context_len)]
    return functions + extra


@pytest.mark.parametrize(("module", "name", "function"), formula_functions(),
                         ids=lambda value: value if isinstance(value, str) else "")
def test_formula_docstring_has_units_equation_reference_and_example(module, name, function):
    text = inspect.getdoc(function)
    missing = [section for section in SECTIONS if f"\n{section}\n" not in f"\n{text}\n"]
    assert not missing, f"{module.__name__}.{name} lacks {missing}"
    parameters = text.split("Parameters\n")[1].split("Returns\n")[0]
    assert "[" in parameters and "]" in parameters, f"{name}: parameters carry no units"
    assert ".. [1]" in text.split("References\n")[1], f"{name}: no numbered reference"
