"""Every example in the package's docstrings runs: each module whose source holds one is found
by reading the files, so no example is left out of the suite and goes stale."""

import doctest
import importlib
from pathlib import Path

import pytest

import fleetplan

PACKAGE = Path(fleetplan.__file__).parent


def modules_with_examples() -> list[str]:
    """Dotted names of the package's modules that hold a docstring example."""
    paths = sorted(p for p in PACKAGE.rglob("*.py") if ">>> " in p.read_text(encoding="utf-8"))
    return [".".join(("fleetplan", *p.relative_to(PACKAGE).with_suffix("").parts)) for p in paths]


def test_the_examples_are_found_across_the_layers():
    found = modules_with_examples()
    layers = {"fleetplan.sweeps.memory", "fleetplan.optimizer.current_fleet",
              "fleetplan.exports.csv", "fleetplan.catalogs.prices", "fleetplan.cli.tables"}
    assert layers <= set(found)


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
