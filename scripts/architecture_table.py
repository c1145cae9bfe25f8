"""Print the README's module table: every module of every layer with the first line of its docstring.

Run ``python scripts/architecture_table.py`` after adding, renaming or re-describing a module and
paste its output between the ``modules`` markers of README.md; ``tests/test_architecture.py``
fails while the two differ.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "fleetplan"
LAYERS = ("errors", "catalogs", "sweeps", "optimizer", "exports", "cli")


def first_docstring_line(path: Path) -> str:
    """The first sentence of a module's docstring, or an empty string."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    return re.split(r"(?<=[.;])\s", paragraph, maxsplit=1)[0]


def module_table() -> str:
    """Markdown: one table row per module, grouped by layer, lowest layer first."""
    lines = ["| layer | module | what it holds |", "|---|---|---|"]
    for layer in LAYERS:
        single = PACKAGE / f"{layer}.py"
        paths = [single] if single.exists() else sorted((PACKAGE / layer).glob("*.py"))
        for path in paths:
            name = path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".")
            lines.append(f"| {layer} | `{name}` | {first_docstring_line(path).replace('|', '/')} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(module_table())
