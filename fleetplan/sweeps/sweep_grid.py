"""The sweep engine: a cartesian grid of configurations x contexts x lengths x batches, evaluated
chunk by chunk with the vectorized row kernel.

The grid is never materialized as Python objects: a chunk is a rectangular block of the axes
(whole configurations, or a range of contexts of one), and each formula is evaluated on numpy
broadcast shapes, so a per-configuration quantity is computed once per configuration and a
(configuration, batch) quantity once per pair; only the output columns are expanded to full
length. Memory is bounded by the chunk size, so ``iter_sweep`` streams grids far larger than
memory.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fleetplan.catalogs import Catalogs
from fleetplan.errors import InvalidValueError
from fleetplan.sweeps import disaggregation, row_kernel
from fleetplan.sweeps.assumptions import LEVERS, assumptions_from
from fleetplan.sweeps.columns import DISAGGREGATION_COLUMNS, DISAGGREGATION_KEYS
from fleetplan.sweeps.configurations import CONFIG_KEYS, config_frame, with_prefill_side
from fleetplan.sweeps.inputs import (
    axis_values,
    catalog_or_default,
    lever_values,
    prefill_pairs,
    resolve_ids,
)
from fleetplan.sweeps.replica_constants import ReplicaConstants
from fleetplan.sweeps.sweep_table import (
    as_frame,
    build_table,
    column_arrays,
    empty_arrays,
    table_columns,
)

log = logging.getLogger(__name__)

DEFAULT_CHUNK_ROWS = 1_000_000
#: Largest sweep ``sweep`` builds in memory by default [rows], and the memory one row takes
#: there [bytes] (about 30 columns of 8 bytes): 10 M rows is about 2.6 GB.
DEFAULT_MAX_ROWS = 10_000_000
BYTES_PER_ROW = 256


@dataclass(frozen=True)
class Grid:
    """A resolved sweep grid: configurations and the numeric axes, in row-major order.

    With ``prefill_axis`` the configurations also carry a prefill replica (``prefill_gpu``,
    ``prefill_tp``, constants prefixed ``prefill.``) and ``gpu``/``tp`` are the decode replica.
    """

    configs: pd.DataFrame
    lever_axes: tuple[str, ...]
    context_len: np.ndarray
    input_len: np.ndarray | None
    output_len: np.ndarray
    batch: np.ndarray
    prefill_axis: bool = False

    @property
    def extra_columns(self) -> tuple[str, ...]:
        """Output columns beyond ``SWEEP_COLUMNS``: swept levers, then the disaggregation columns."""
        return self.lever_axes + (tuple(DISAGGREGATION_COLUMNS) if self.prefill_axis else ())

    def constants(self) -> ReplicaConstants:
        """The configurations' constants as the kernel reads them."""
        return ReplicaConstants.from_frame(self.configs)

    def evaluate(self, constants: ReplicaConstants, rows: row_kernel.Rows) -> dict[str, np.ndarray]:
        """Every metric of ``rows`` from the configuration constants (``self.constants()``)."""
        gathered = constants.gather(rows.config)
        metrics = row_kernel.evaluate(gathered, rows)
        return disaggregation.evaluate_rows(gathered, rows, metrics) if self.prefill_axis else metrics

    @property
    def engine(self) -> str:
        """The serving engine whose profile and efficiencies the grid uses."""
        return str(self.configs["engine"].iloc[0]) if len(self.configs) else ""

    @property
    def shape(self) -> tuple[int, ...]:
        inputs = 1 if self.input_len is None else len(self.input_len)
        return (len(self.configs), len(self.context_len), inputs, len(self.output_len), len(self.batch))

    @property
    def n_rows(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def block(self, configs: slice, contexts: slice) -> row_kernel.Rows:
        """Axis values of a rectangular block, shaped to broadcast (config, context, input, output, batch)."""
        config = np.arange(configs.start, configs.stop, dtype=np.int64).reshape(-1, 1, 1, 1, 1)
        context_len = self.context_len[contexts].reshape(1, -1, 1, 1, 1)
        input_len = context_len if self.input_len is None else self.input_len.reshape(1, 1, -1, 1, 1)
        return row_kernel.Rows(config, context_len, input_len, self.output_len.reshape(1, 1, 1, -1, 1),
                           self.batch.reshape(1, 1, 1, 1, -1))

    def blocks(self, chunk_rows: int, configs: slice | None = None):
        """Row-major blocks of about ``chunk_rows`` rows over the configurations ``configs`` (all
        by default): whole configurations when they fit, else context ranges of one
        configuration (at least one context per block)."""
        configs = configs or slice(0, self.shape[0])
        n_contexts = self.shape[1]
        per_context = int(np.prod(self.shape[2:]))
        per_config = n_contexts * per_context
        if per_config <= chunk_rows:
            step = max(chunk_rows // max(per_config, 1), 1)
            for first in range(configs.start, configs.stop, step):
                yield self.block(slice(first, min(first + step, configs.stop)), slice(0, n_contexts))
            return
        step = max(chunk_rows // per_context, 1)
        for config in range(configs.start, configs.stop):
            for first in range(0, n_contexts, step):
                yield self.block(slice(config, config + 1), slice(first, min(first + step, n_contexts)))

    def partitions(self, columns=("gpu", "model")) -> list[tuple[dict, slice]]:
        """Contiguous configuration ranges sharing the values of ``columns`` (configurations are
        ordered gpu, model, quant, ..., so a (gpu, model) pair is one range)."""
        changed = np.zeros(max(len(self.configs) - 1, 0), dtype=bool)
        for column in columns:
            values = self.configs[column].astype(str).to_numpy()
            changed |= values[1:] != values[:-1]
        starts = np.flatnonzero(np.r_[True, changed])
        stops = np.r_[starts[1:], len(self.configs)]
        return [(dict(zip(columns, self.configs.loc[start, list(columns)].astype(str))), slice(int(start), int(stop)))
                for start, stop in zip(starts, stops)]


def make_grid(gpus, models, quants, tps=(1,), contexts=(2048,), batches=(1,), kv_quants=None,
              input_lens=None, output_lens=(256,), catalogs: Catalogs | None = None, prefill_gpus=None,
              prefill_tps=None, **overrides) -> Grid:
    """Validate the axes and build the configuration table of a sweep.

    ``prefill_gpus`` (GPU ids, ``"none"`` = colocated) with ``prefill_tps`` (default 1) makes
    prefill/decode disaggregation an axis: ``gpus``/``tps`` are then the decode replica.
    """
    catalogs = catalog_or_default(catalogs)
    levers = {name: lever_values(name, overrides.pop(name)) for name in LEVERS
              if name in overrides and not np.isscalar(overrides[name])}
    assumptions = assumptions_from(overrides)
    ids = {kind: resolve_ids(catalogs, kind, names) for kind, names in
           (("gpu", gpus), ("model", models), ("quant", quants))}
    kv = None if kv_quants is None else resolve_ids(catalogs, "quant", kv_quants, field="kv_quants")
    prefill = prefill_pairs(catalogs, prefill_gpus, prefill_tps)
    keys = _config_keys(catalogs, ids, kv, axis_values("tps", tps, high=1024), levers, prefill)
    configs = config_frame(catalogs, keys, assumptions, per_config=keys)
    if prefill is not None:
        configs = with_prefill_side(catalogs, configs, assumptions, levers)
    return Grid(
        configs=configs,
        lever_axes=tuple(levers),
        context_len=axis_values("contexts", contexts, high=100_000_000),
        input_len=None if input_lens is None else axis_values("input_lens", input_lens, high=100_000_000),
        output_len=axis_values("output_lens", output_lens, high=10_000_000),
        batch=axis_values("batches", batches, high=10_000_000),
        prefill_axis=prefill is not None,
    )


def _config_keys(catalogs: Catalogs, ids: dict, kv_quants, tps, levers: dict, prefill: pd.DataFrame | None) -> pd.DataFrame:
    axes = [pd.DataFrame({"gpu": ids["gpu"]}), pd.DataFrame({"model": ids["model"]}),
            pd.DataFrame({"quant": ids["quant"]})]
    if kv_quants is not None:
        axes.append(pd.DataFrame({"kv_quant": kv_quants}))
    axes.append(pd.DataFrame({"tp": tps}))
    axes += [pd.DataFrame({name: values}) for name, values in levers.items()]
    if prefill is not None:  # innermost, so a (gpu, model) pair stays one contiguous range
        axes.append(prefill)
    keys = axes[0]
    for axis in axes[1:]:
        keys = keys.merge(axis, how="cross")
    if kv_quants is None:
        keys["kv_quant"] = catalogs.quants["default_kv_quant"].reindex(keys["quant"]).to_numpy()
    return keys[CONFIG_KEYS + list(levers) + (list(DISAGGREGATION_KEYS) if prefill is not None else [])]


def check_rows(n_rows: int, max_rows: int | None) -> None:
    """Refuse a table of ``n_rows`` rows held in memory when it is more than ``max_rows``."""
    if max_rows is not None and n_rows > max_rows:
        gigabytes = n_rows * BYTES_PER_ROW / 1e9
        message = (f"the sweep has {n_rows:,} rows (about {gigabytes:,.1f} GB in memory), more than "
                   f"max_rows {max_rows:,}: stream it with iter_sweep, or pass a larger max_rows")
        raise InvalidValueError(message)


def _with_filter_columns(names: tuple[str, ...], drop_invalid: bool) -> tuple[str, ...]:
    """``names`` plus ``valid`` and ``fits`` when rows are dropped by them."""
    return tuple(dict.fromkeys((*names, "valid", "fits"))) if drop_invalid else names


def _finished(table: pd.DataFrame, names: tuple[str, ...], drop_invalid: bool) -> pd.DataFrame:
    """Rows that run and fit (``drop_invalid``), then only the columns asked for."""
    if drop_invalid:
        table = table[table["valid"] & table["fits"]].reset_index(drop=True)
    return table if len(table.columns) == len(names) else table[list(names)]


def iter_sweep(gpus, models, quants, *, chunk_rows: int = DEFAULT_CHUNK_ROWS, drop_invalid: bool = False,
               grid: Grid | None = None, configs: slice | None = None, columns=None, **axes) -> Iterator[pd.DataFrame]:
    """Yield the sweep table in chunks of at most ``chunk_rows`` rows (same columns as ``sweep``);
    ``configs`` restricts it to a range of the grid's configurations."""
    grid = grid or make_grid(gpus, models, quants, **axes)
    names = table_columns(grid.extra_columns, columns)
    arrays = grid.constants()
    log.info("sweeping %d rows (%d configurations)", grid.n_rows, len(grid.configs))
    for rows in grid.blocks(chunk_rows, configs):
        table = build_table(grid.configs, rows, grid.evaluate(arrays, rows), extra_columns=grid.extra_columns,
                            columns=_with_filter_columns(names, drop_invalid))
        yield _finished(table, names, drop_invalid)


def sweep(gpus: Sequence[str], models: Sequence[str], quants: Sequence[str] = ("bf16",), *,
          tps=(1,), contexts=(2048,), batches=(1,), kv_quants=None, input_lens=None,
          output_lens=(256,), catalogs: Catalogs | None = None, drop_invalid: bool = False, prefill_gpus=None,
          prefill_tps=None, max_rows: int | None = DEFAULT_MAX_ROWS, columns=None, **overrides) -> pd.DataFrame:
    """Evaluate every combination of the axes; one row per configuration.

    Columns and units are ``fleetplan.sweeps.columns.SWEEP_COLUMNS``. Rows that cannot run or do
    not fit are kept and flagged (``valid``, ``fits``, ``reason``) unless ``drop_invalid``.
    ``overrides`` are model assumptions (``mbu``, ``mfu``, ``step_overhead_ms``,
    ``reserve_fraction``, ``usd_per_gpu_hour``, ...; see ``Assumptions``). ``prefill_gpus`` and
    ``prefill_tps`` sweep prefill/decode disaggregation (see ``make_grid``), adding the columns
    ``columns.DISAGGREGATION_COLUMNS``. The whole table is built in memory: a grid of more than
    ``max_rows`` rows is refused before anything is allocated (``iter_sweep`` streams any size;
    ``max_rows=None`` lifts the limit). ``columns`` (names of the table's columns) keeps only
    those: the others are never expanded to the grid's length, so a table of a few columns takes
    a fraction of the memory and of the time to fault it in.

    >>> df = sweep(["h100-sxm"], ["llama-3.1-8b"], batches=[1, 64])
    >>> df[["gpu", "batch", "fits"]].to_dict("records")[1]
    {'gpu': 'h100-sxm', 'batch': 64, 'fits': True}
    """
    grid = make_grid(gpus, models, quants, tps=tps, contexts=contexts, batches=batches, kv_quants=kv_quants,
                     input_lens=input_lens, output_lens=output_lens, catalogs=catalogs, prefill_gpus=prefill_gpus,
                     prefill_tps=prefill_tps, **overrides)
    check_rows(grid.n_rows, max_rows)
    names = table_columns(grid.extra_columns, columns)
    computed = _with_filter_columns(names, drop_invalid)
    constants, offset, categories = grid.constants(), 0, {}
    out = empty_arrays(grid.n_rows, computed)
    for rows in grid.blocks(DEFAULT_CHUNK_ROWS):  # blocks fill one preallocated table in place
        # ``metrics`` stays bound until the next block: freeing the block's arrays before the table is
        # assembled makes the allocator return and re-fault their pages (a quarter slower at 1M rows).
        metrics = grid.evaluate(constants, rows)
        block, categories = column_arrays(grid.configs, rows, metrics, out=out, offset=offset, names=computed)
        offset += len(block[computed[0]])
    table = _finished(as_frame(out, categories, computed), names, drop_invalid)
    table.attrs["engine"] = grid.engine
    return table
