"""Typed, self-describing Parquet: explicit schemas, units in field metadata, provenance as JSON.

Sweep tables take their schema from ``SWEEP_COLUMNS`` (dictionary-encoded categories,
fixed-width numbers); columns outside the registry (estimate inputs such as an ``id``) are
inferred from the first chunk. Every file carries fleetplan's provenance as key/value metadata
(see :mod:`fleetplan.exports.provenance`) plus a ``columns`` key with each column's unit and
description, so readers without Arrow field metadata (DuckDB, Polars) see the units too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from fleetplan.errors import InvalidValueError, one_line
from fleetplan.exports.atomic import atomic_dir, atomic_path
from fleetplan.exports.provenance import from_key_values, provenance, to_json, to_key_values
from fleetplan.exports.units import description_of, unit_of
from fleetplan.sweeps.columns import ALL_SWEEP_COLUMNS, SWEEP_COLUMNS, Column

log = logging.getLogger(__name__)

CATEGORY = pa.dictionary(pa.int32(), pa.string())
COMPRESSION = "zstd"
_ARROW_TYPES = {"category": CATEGORY, "bool": pa.bool_(), "int8": pa.int8(), "int16": pa.int16(),
                "int32": pa.int32(), "int64": pa.int64(), "float32": pa.float32(),
                "float64": pa.float64(), "str": pa.string()}


def _inferred_type(series: pd.Series) -> pa.DataType:
    if isinstance(series.dtype, pd.CategoricalDtype):
        return CATEGORY
    try:
        arrow_type = pa.Array.from_pandas(series.iloc[:1000]).type
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.string()
    if pa.types.is_large_string(arrow_type) or pa.types.is_null(arrow_type):
        return pa.string()
    return arrow_type


def column_field(name: str, series: pd.Series | None = None,
                 registry: Mapping[str, Column] = ALL_SWEEP_COLUMNS) -> pa.Field:
    """The Arrow field of one column: registry type, else inferred; unit + description."""
    known = registry.get(name)
    arrow_type = _ARROW_TYPES[known.dtype] if known else _inferred_type(series)
    description = known.description if known else description_of(name)
    unit = known.unit if known else unit_of(name)
    return pa.field(name, arrow_type, metadata={"unit": unit, "description": description})


def table_schema(frame: pd.DataFrame, record: Mapping[str, Any],
                 registry: Mapping[str, Column] = ALL_SWEEP_COLUMNS) -> pa.Schema:
    """Schema of ``frame`` in its column order, with provenance and column units as metadata."""
    fields = [column_field(str(name), frame[name], registry) for name in frame.columns]
    columns = {f.name: {"unit": f.metadata[b"unit"].decode(),
                        "description": f.metadata[b"description"].decode()} for f in fields}
    pairs = to_key_values(record)
    pairs[b"columns"] = to_json(columns).encode()
    return pa.schema(fields, metadata=pairs)


def to_arrow(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """``frame`` converted to exactly ``schema`` (categories re-encoded, strings kept as text)."""
    if list(frame.columns) != schema.names:
        message = (f"sweep chunk columns {list(frame.columns)} differ from the first chunk's "
                   f"{schema.names}")
        raise InvalidValueError(message)
    arrays = [_column_array(frame[field.name], field.type) for field in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


def _column_array(series: pd.Series, arrow_type: pa.DataType) -> pa.Array:
    if pa.types.is_dictionary(arrow_type) and not isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype("category")
    if pa.types.is_string(arrow_type) and series.dtype == object:
        series = series.map(lambda v: v if v is None or isinstance(v, str) else str(v))
    try:
        return pa.Array.from_pandas(series).cast(arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as error:
        message = f"column '{series.name}' cannot be written as {arrow_type}: {error}"
        raise InvalidValueError(message) from error


def _chunks(data: pd.DataFrame | Iterable[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    if isinstance(data, pd.DataFrame):
        yield data
        return
    for chunk in data:
        if not isinstance(chunk, pd.DataFrame):
            message = f"sweep chunks must be pandas DataFrames, got {type(chunk).__name__}"
            raise InvalidValueError(message)
        yield chunk


def _first_and_rest(data) -> tuple[pd.DataFrame, Iterator[pd.DataFrame]]:
    chunks = _chunks(data)
    first = next(chunks, None)
    if first is None:  # no chunk at all: an empty table with the registry's columns
        first = empty_sweep()
    return first, chunks


def empty_sweep() -> pd.DataFrame:
    """A sweep table without rows: the registry's columns and dtypes."""
    return pd.DataFrame({name: pd.Series(dtype=column.dtype)
                         for name, column in SWEEP_COLUMNS.items()})


def write_sweep_parquet(chunks: pd.DataFrame | Iterable[pd.DataFrame], path: str | os.PathLike,
                        *, metadata: Mapping[str, Any] | None = None,
                        partition_by: Sequence[str] | None = None, catalogs: Any = None) -> Path:
    """Write a sweep (one DataFrame or an iterable of chunks) to Parquet with bounded memory.

    One file, written chunk by chunk with ``ParquetWriter`` (one row group per chunk), or with
    ``partition_by`` (e.g. ``("gpu", "model")``) a hive-partitioned folder of files. The schema
    comes from the first chunk; later chunks must have the same columns. Returns ``path``.
    """
    first, rest = _first_and_rest(chunks)
    record = provenance("sweep", metadata, catalogs=catalogs)
    schema = table_schema(first, record)
    tables = (to_arrow(chunk, schema) for chunk in _prepend(first, rest))
    if partition_by:
        return _write_partitioned(tables, Path(path), schema, list(partition_by))
    rows = 0
    with atomic_path(path) as temporary, pq.ParquetWriter(
            temporary, schema, compression=COMPRESSION, write_statistics=True,
            **_encodings(schema)) as writer:
        for table in tables:
            writer.write_table(table)
            rows += table.num_rows
    log.info("wrote %d sweep rows to %s", rows, path)
    return Path(path)


def _prepend(first: pd.DataFrame, rest: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    yield first
    yield from rest


def _encodings(schema: pa.Schema) -> dict[str, list[str]]:
    """Dictionary pages where values repeat; floats byte-stream-split, which zstd compresses
    about a quarter smaller (and faster) than plain doubles, instead of a dictionary attempt."""
    floats = [f.name for f in schema if pa.types.is_floating(f.type)]
    return {"use_dictionary": [f.name for f in schema if f.name not in floats],
            "use_byte_stream_split": floats}


def _write_partitioned(tables: Iterator[pa.Table], folder: Path, schema: pa.Schema,
                       partition_by: list[str]) -> Path:
    unknown = [name for name in partition_by if name not in schema.names]
    if unknown:
        message = (f"partition_by column '{unknown[0]}' is not a sweep column "
                   f"(valid: {', '.join(schema.names)})")
        raise InvalidValueError(message)
    partitioning = ds.partitioning(pa.schema([schema.field(n) for n in partition_by]),
                                   flavor="hive")
    options = ds.ParquetFileFormat().make_write_options(compression=COMPRESSION,
                                                         **_encodings(schema))
    batches = (batch for table in tables for batch in table.to_batches())
    with atomic_dir(folder) as temporary:
        ds.write_dataset(batches, temporary, schema=schema, format="parquet",
                         partitioning=partitioning, file_options=options,
                         basename_template="part-{i}.parquet", max_partitions=1_000_000,
                         existing_data_behavior="overwrite_or_ignore")
    log.info("wrote hive-partitioned sweep to %s", folder)
    return folder


def write_table_parquet(frame: pd.DataFrame, path: str | os.PathLike, record: Mapping[str, Any],
                        registry: Mapping[str, Column] = SWEEP_COLUMNS) -> Path:
    """Write one small table (e.g. a plan table) to ``path`` atomically."""
    schema = table_schema(frame, record, registry)
    with atomic_path(path) as temporary:
        pq.write_table(to_arrow(frame, schema), temporary, compression=COMPRESSION,
                       **_encodings(schema))
    return Path(path)


def read_provenance(path: str | os.PathLike) -> dict[str, Any]:
    """fleetplan's key/value metadata of a Parquet file, decoded (JSON values parsed)."""
    try:
        return from_key_values(pq.read_metadata(path).metadata)
    except (pa.ArrowException, OSError) as problem:
        message = f"{path}: not a readable Parquet file ({one_line(str(problem)).splitlines()[0][:200]})"
        raise InvalidValueError(message) from None


#: Rows read from a Parquet sweep at a time.
BATCH_ROWS = 1_000_000


def read_sweep_batches(source: Path) -> Iterator[pd.DataFrame]:
    """A saved sweep (one Parquet file or a hive-partitioned folder) in batches of ``BATCH_ROWS``,
    sweep columns first."""
    source = Path(source)
    if not source.exists():
        message = f"{source}: sweep not found"
        raise InvalidValueError(message)
    if source.is_dir() and next(iter(source.rglob("*.parquet")), None) is None:
        message = f"{source}: the folder holds no Parquet files, so no sweep"
        raise InvalidValueError(message)
    try:
        dataset = ds.dataset(source, format="parquet", partitioning="hive")
        scanner = dataset.scanner(batch_size=BATCH_ROWS)
    except (pa.ArrowException, OSError) as problem:
        message = f"{source}: not a readable Parquet sweep ({one_line(str(problem))[:200]})"
        raise InvalidValueError(message) from None
    return _frames(scanner.to_batches())


def _frames(batches) -> Iterator[pd.DataFrame]:
    for batch in batches:
        frame = batch.to_pandas()
        known = [c for c in SWEEP_COLUMNS if c in frame.columns]  # partitions come back last
        yield frame[known + [c for c in frame.columns if c not in SWEEP_COLUMNS]]


def sweep_parameters(source: Path) -> dict:
    """The run parameters and catalog versions a saved sweep was made with, for a converted copy."""
    file = source if source.is_file() else next(iter(sorted(source.rglob("*.parquet"))), None)
    if file is None:
        return {}
    record = read_provenance(file)
    parameters = dict(record.get("parameters") or {})
    parameters["converted_from"] = str(source)
    if record.get("catalog_versions"):
        parameters["catalog_versions"] = record["catalog_versions"]
    return parameters
