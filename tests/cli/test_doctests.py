"""The examples in the docstrings of the price rule, the tables and the workbook helpers run."""

import doctest
import importlib

import pytest

MODULES = ["fleetplan.catalogs.prices", "fleetplan.cli.tables", "fleetplan.exports.labels", "fleetplan.exports.csv",
           "fleetplan.exports.xlsx_common", "fleetplan.exports.xlsx_print", "fleetplan.exports.xlsx_sources",
           "fleetplan.exports.plan_quantities", "fleetplan.sweeps.rent_or_buy", "fleetplan.optimizer.plan_summary"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
