"""Live cost formulas of a sweep grid, linked to per-GPU prices on the Assumptions sheet.

The formulas are the engine's cost formulas (``fleetplan.sweeps.throughput``)::

    usd_per_hour            = tp * price_<gpu>                         [USD/hour]
    usd_per_m_output_tokens = usd_per_hour * 1e6 / (output_tok_s * 3600)
    usd_per_m_total_tokens  = usd_per_hour * 1e6 / (req_s * (input_len + output_len) * 3600)
    usd_per_k_requests      = usd_per_hour * 1e3 / (req_s * 3600)

A row gets a formula only where the formula reproduces the grid's own value (relative 1e-9),
so the workbook never shows a number the sweep did not compute; other rows keep constants.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from openpyxl.utils.cell import get_column_letter

from fleetplan.exports.xlsx_rows import FormulaBuilder
from fleetplan.exports.xlsx_sheets import Assumptions

log = logging.getLogger(__name__)

RELATIVE_TOLERANCE = 1e-9
_PER_TOKEN = {
    "usd_per_m_output_tokens": (("output_tok_s",), "{h}*1000000/({output_tok_s}*3600)"),
    "usd_per_m_total_tokens": (("req_s", "input_len", "output_len"),
                               "{h}*1000000/({req_s}*({input_len}+{output_len})*3600)"),
    "usd_per_k_requests": (("req_s",), "{h}*1000/({req_s}*3600)"),
}


def _close(computed: np.ndarray, expected: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        ok = np.abs(computed - expected) <= RELATIVE_TOLERANCE * np.abs(expected)
    return ok & np.isfinite(computed) & np.isfinite(expected)


def _values(grid: pd.DataFrame, name: str) -> np.ndarray:
    return grid[name].to_numpy(dtype=float, na_value=np.nan)


def gpu_prices(grid: pd.DataFrame) -> pd.Series:
    """USD per GPU-hour of each GPU whose rows all share one price (``usd_per_hour / tp``)."""
    if not {"gpu", "tp", "usd_per_hour"} <= set(grid.columns) or grid.empty:
        return pd.Series(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        price = _values(grid, "usd_per_hour") / _values(grid, "tp")
    per_gpu = pd.DataFrame({"gpu": grid["gpu"].astype(str).to_numpy(), "price": price})
    usable = np.isfinite(price) & grid["gpu"].notna().to_numpy()
    if "prefill_tp" in grid:  # a disaggregated row's price includes its prefill replicas
        usable &= _values(grid, "prefill_tp") == 0
    per_gpu = per_gpu[usable]
    stats = per_gpu.groupby("gpu", sort=True)["price"].agg(["min", "max", "first"])
    consistent = (stats["max"] - stats["min"]) <= RELATIVE_TOLERANCE * stats["max"].abs()
    mixed = sorted(stats.index[~consistent])
    if mixed:
        log.info("no single price per GPU-hour for %s: their costs stay constants", mixed)
    return stats.loc[consistent, "first"]


@dataclass
class CostFormulas:
    """Formula builders for the cost columns of one grid (empty when nothing can be linked)."""

    builders: dict[str, FormulaBuilder] = field(default_factory=dict)
    live: bool = False

    @classmethod
    def from_grid(cls, grid: pd.DataFrame, assumptions: Assumptions,
                  chosen: pd.DataFrame | None = None) -> CostFormulas:
        """Add the GPU prices to ``assumptions`` (each with the price rule's row it came from,
        ``chosen``, where it is that row's price) and build the grid's cost formulas."""
        prices = gpu_prices(grid)
        if prices.empty:
            return cls()
        assumptions.section("GPU prices", "USD per GPU-hour each sweep row was costed with, and the "
                            "catalog row it came from (given: a price set on the command line).")
        names = assumptions.prices(_with_origin(prices, chosen), keys=["gpu"])
        letters = {name: get_column_letter(i) for i, name in enumerate(grid.columns, start=1)}
        name_of_gpu = {gpu: names[(gpu,)] for gpu in prices.index}
        gpu_names = grid["gpu"].astype(str).map(name_of_gpu).to_numpy(dtype=object)
        price = pd.Series(gpu_names).map({n: prices[g] for g, n in name_of_gpu.items()})
        computed = _values(grid, "tp") * price.to_numpy(dtype=float, na_value=np.nan)
        hourly_ok = _close(computed, _values(grid, "usd_per_hour"))
        builders = {"usd_per_hour": _hourly(letters["tp"], gpu_names, hourly_ok)}
        for column, (inputs, template) in _PER_TOKEN.items():
            if column in grid.columns and set(inputs) <= set(grid.columns):
                ok = hourly_ok & _close(_per_token(grid, column), _values(grid, column))
                refs = {name: letters[name] for name in inputs} | {"h": letters["usd_per_hour"]}
                builders[column] = _templated(template, refs, ok)
        linked = int(hourly_ok.sum())
        log.debug("linked %d of %d sweep rows to Assumptions prices", linked, len(grid))
        return cls(builders, live=linked > 0)


def _with_origin(prices: pd.Series, chosen: pd.DataFrame | None) -> pd.DataFrame:
    """gpu, usd_per_gpu_hour and, where the price is the rule's row, its provider, region, as_of
    and source."""
    frame = prices.rename("usd_per_gpu_hour").rename_axis("gpu").reset_index()
    if chosen is None or chosen.empty:
        return frame
    rows = chosen[chosen["pricing_type"] == "on_demand"].drop_duplicates("gpu").set_index("gpu")
    matched = rows.reindex(frame["gpu"]).reset_index(drop=True)
    same = np.isclose(matched["usd_per_gpu_hour"].to_numpy(dtype=float), frame["usd_per_gpu_hour"].to_numpy(),
                      rtol=RELATIVE_TOLERANCE)
    for column in ("provider", "region", "as_of", "warning", "source"):
        frame[column] = np.where(same, matched[column].fillna("").astype(str), "given" if column == "provider" else "")
    return frame


def _per_token(grid: pd.DataFrame, column: str) -> np.ndarray:
    """The engine's formula for ``column`` evaluated in Python on the grid's own inputs."""
    hourly = _values(grid, "usd_per_hour")
    with np.errstate(divide="ignore", invalid="ignore"):
        if column == "usd_per_m_output_tokens":
            return hourly * 1e6 / (_values(grid, "output_tok_s") * 3600.0)
        requests = _values(grid, "req_s")
        if column == "usd_per_m_total_tokens":
            tokens = _values(grid, "input_len") + _values(grid, "output_len")
            return hourly * 1e6 / (requests * tokens * 3600.0)
        return hourly * 1e3 / (requests * 3600.0)


def _positions(block: pd.DataFrame) -> np.ndarray:
    return block.index.to_numpy()


def _hourly(tp_letter: str, gpu_names: np.ndarray, ok: np.ndarray) -> FormulaBuilder:
    def build(block: pd.DataFrame, rows: list[str]) -> list[str | None]:
        at = _positions(block)
        return [f"{tp_letter}{r}*{name}" if good else None
                for r, name, good in zip(rows, gpu_names[at].tolist(), ok[at].tolist())]

    return build


def _templated(template: str, refs: dict[str, str], ok: np.ndarray) -> FormulaBuilder:
    # "{h}*1000/({req_s}*3600)" -> "Y{r}*1000/(W{r}*3600)", then one format per row
    pattern = template.format(**{k: v + "{r}" for k, v in refs.items()})
    render: Callable[..., str] = pattern.format

    def build(block: pd.DataFrame, rows: list[str]) -> list[str | None]:
        good_rows = ok[_positions(block)].tolist()
        return [render(r=r) if good else None for r, good in zip(rows, good_rows)]

    return build
