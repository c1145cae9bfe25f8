"""Terminal tables in one number style: thousands separators, no scientific notation, units in
every header."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

#: Terminal width the tables are laid out for [characters].
WIDTH = 100
MISSING = "-"


def number_text(value: object) -> str:
    """A number as the tables print it: whole numbers with thousands separators, fractions with
    three significant digits, never scientific notation.

    >>> [number_text(v) for v in (6.0, 10712.34, 23.456, 2.949, 0.01783, 0.0, float("nan"))]
    ['6', '10,712', '23.5', '2.95', '0.0178', '0', '-']
    """
    if value is None or isinstance(value, str):
        return MISSING if value is None else value
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    number = float(value)
    if not math.isfinite(number):
        return MISSING if math.isnan(number) else ("infinite" if number > 0 else "-infinite")
    size = abs(number)
    if number == round(number) or size >= 100:
        return f"{number:,.0f}"
    if size >= 10:
        return f"{number:,.1f}"
    if size >= 1:
        return f"{number:,.2f}"
    return f"{number:.{2 - math.floor(math.log10(size))}f}"


def exact_text(value: object) -> str:
    """A catalog value in full: thousands separators, every decimal it has, no scientific notation.

    >>> [exact_text(v) for v in (131072.0, 6.155, 0.0004, True, None)]
    ['131,072', '6.155', '0.0004', 'yes', '-']
    """
    if isinstance(value, (bool, np.bool_)) or value is None or isinstance(value, str):
        return cell_text(value)
    if not isinstance(value, (int, float, np.integer, np.floating)) or not math.isfinite(float(value)):
        return cell_text(value)
    number = float(value)
    if number == round(number):
        return f"{number:,.0f}"
    decimals = min(len(f"{number:.10f}".rstrip("0").split(".")[1]), 10)
    return f"{number:,.{decimals}f}"


def header(label: str, unit: str) -> str:
    """``label (unit)``, or the label alone for unitless columns."""
    return f"{label} ({unit})" if unit else label


def cell_text(value: object) -> str:
    """Any cell: numbers in the one style, text as is, missing values as a dash."""
    if isinstance(value, float) and math.isnan(value):
        return MISSING
    if value is None or value is pd.NA:
        return MISSING
    if isinstance(value, (int, float, np.integer, np.floating, bool, np.bool_)):
        return number_text(value)
    return str(value)


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]], *,
                numeric: Sequence[bool] | None = None, caption: str | None = None) -> None:
    """A title line, a rich table with numbers right-aligned and a caption line, on stdout, laid
    out for WIDTH columns."""
    table = Table(header_style="bold")
    numeric = numeric or [False] * len(headers)
    texts = [[cell_text(v) for v in row] for row in rows]
    widths = [max([len(row[i]) for row in texts] + [len(word) for word in name.split()])
              for i, name in enumerate(headers)]
    excess = sum(widths) + 3 * len(widths) + 1 - WIDTH
    if excess > 0:  # the widest column of text folds its values
        text_columns = [i for i, right in enumerate(numeric) if not right] or [0]
        widest = max(text_columns, key=lambda i: widths[i])
        widths[widest] = max(widths[widest] - excess, 8)
    for name, right, width in zip(headers, numeric, widths):
        table.add_column(name, justify="right" if right else "left", overflow="fold", width=width)
    for row in texts:
        table.add_row(*row)
    console = Console(file=sys.stdout, width=WIDTH)
    console.print(title, style="bold", highlight=False)
    console.print(table)
    if caption:
        console.print(caption, highlight=False)
