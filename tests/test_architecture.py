"""The layers import one way, at the top of each file, and every area names its entry points."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
from importlinter.cli import lint_imports

import fleetplan

PACKAGE = Path(fleetplan.__file__).parent
ROOT = PACKAGE.parent


def test_the_layers_contract_holds(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True) == 0


def _inner_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                own = isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("fleetplan"))
                own |= isinstance(node, ast.Import) and any(a.name.startswith("fleetplan") for a in node.names)
                if own:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} in {function.name}")
    return found


def test_no_function_imports_fleetplan():
    inner = [line for path in sorted(PACKAGE.rglob("*.py")) for line in _inner_imports(path)]
    assert inner == []


@pytest.mark.parametrize(("area", "names"), [
    ("fleetplan.catalogs", ["load_catalogs", "Catalogs", "check_files", "HOURS_PER_MONTH", "PRICING_TYPES"]),
    ("fleetplan.sweeps", ["sweep", "iter_sweep", "estimate_cases", "disaggregated", "Assumptions"]),
    ("fleetplan.optimizer", ["load_scenario", "plan_scenario", "FleetPlan", "optimize_problem", "Problem"]),
    ("fleetplan.exports", ["write_plan", "write_sweep", "write_compare", "write_grid", "read_plan_json"]),
])
def test_each_area_exports_its_entry_points(area, names):
    module = __import__(area, fromlist=names)
    missing = [name for name in names if name not in module.__all__ or not hasattr(module, name)]
    assert missing == []


def test_readme_lists_every_module():
    """The README's module table is the one ``scripts/architecture_table.py`` prints today."""
    spec = importlib.util.spec_from_file_location("architecture_table", ROOT / "scripts" / "architecture_table.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = readme.split("<!-- modules:start -->\n", 1)[1].split("<!-- modules:end -->", 1)[0]
    assert listed == script.module_table()
