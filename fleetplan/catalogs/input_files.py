"""Reading the files users hand to fleetplan: text only, UTF-8 only, bounded in size.

Every reader of a user's file (scenarios, what-if grids, catalog overrides, profiles, cases,
measurements, saved plans) goes through here, so a binary, non-UTF-8, empty, oversized or
missing file is one ``FleetplanError`` line naming the file, never a ``UnicodeDecodeError`` or
``EmptyDataError``. YAML is loaded strictly: a key given twice is an error (TOML and JSON
readers agree), and aliases may not expand the document past :data:`MAX_YAML_NODES` nodes
(a "billion laughs" file is refused before it is built). A YAML file that is JSON is parsed by
the JSON parser, with the same rules, in a fraction of the time.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from fleetplan.errors import FleetplanError, InvalidValueError

log = logging.getLogger(__name__)

#: Largest scenario or what-if grid file read [bytes]: 500 workloads fit in a small fraction.
MAX_DOCUMENT_BYTES = 10 * 2**20
#: Largest table (catalog override, measurements, cases, profile) read [bytes].
MAX_TABLE_BYTES = 200 * 2**20
#: Nodes a YAML document may hold once its aliases are expanded.
MAX_YAML_NODES = 1_000_000


def check_file(path: Path, what: str, error: type[FleetplanError], max_bytes: int) -> None:
    """Refuse a missing file, a folder or one larger than ``max_bytes``, naming the file."""
    if not path.exists():
        message = f"{path}: {what} not found"
        raise error(message)
    if path.is_dir():
        message = f"{path}: is a folder, not a {what}"
        raise error(message)
    size = path.stat().st_size
    if size > max_bytes:
        message = f"{path}: {what} is larger than {max_bytes / 2**20:g} MB ({size / 2**20:.1f} MB)"
        raise error(message)


def decode_text(data: bytes, label: str, error: type[FleetplanError] = InvalidValueError) -> str:
    """``data`` as text: strict UTF-8 (a BOM is dropped), no NUL bytes.

    >>> decode_text(b"gpu\\nl40s", "x.csv")
    'gpu\\nl40s'
    """
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        message = f"{label}: binary data, not text (NUL byte at line {line})"
        raise error(message)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as problem:
        line = data.count(b"\n", 0, problem.start) + 1
        message = (f"{label}: not UTF-8 text (byte 0x{data[problem.start]:02x} at line {line}); "
                   "save it as UTF-8")
        raise error(message) from None


def read_text(path: str | os.PathLike, what: str = "file", *, error: type[FleetplanError] = InvalidValueError,
              max_bytes: int = MAX_TABLE_BYTES) -> str:
    """The UTF-8 text of a user's file, or one ``error`` line naming the file and the problem."""
    path = Path(path)
    check_file(path, what, error, max_bytes)
    return decode_text(path.read_bytes(), str(path), error)


def read_csv_table(path: str | os.PathLike, what: str = "CSV file", *,
                   error: type[FleetplanError] = InvalidValueError, **options: Any) -> pd.DataFrame:
    """A user's CSV as a DataFrame (``options`` go to ``pandas.read_csv``); an empty, binary or
    malformed file is one ``error`` line."""
    text = read_text(path, what, error=error)
    return csv_frame(text, str(path), error, **options)


def csv_frame(text: str, label: str, error: type[FleetplanError] = InvalidValueError, **options: Any) -> pd.DataFrame:
    """Parse CSV ``text``; an empty or malformed table is one ``error`` line."""
    _refuse_empty(text, label, error)
    _refuse_semicolons(text, label, error)
    try:
        return pd.read_csv(io.StringIO(text), **options)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, ValueError) as problem:
        first = str(problem).strip().splitlines()[0] if str(problem).strip() else "no columns"
        fields = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", first)
        if fields:
            expected, line, seen = fields.groups()
            first = (f"line {line} has {seen} fields where the lines before it have {expected}; "
                     f"a value holding a comma must be quoted")
        message = f"{label}: not a readable CSV file ({first})"
        raise error(message) from None


def _refuse_semicolons(text: str, label: str, error: type[FleetplanError]) -> None:
    """A table whose first line is split by ``;`` and not by commas (as spreadsheets of some
    locales save "CSV", often with decimal commas too) is refused rather than misread."""
    first = next((line for line in text.lstrip("\ufeff").splitlines() if line.strip()), "")
    if ";" in first and "," not in first and "\t" not in first:
        message = (f"{label}: its values are separated by ';', not commas: save the table as "
                   f"comma-separated CSV (with '.' as the decimal point)")
        raise error(message)


def _refuse_empty(text: str, label: str, error: type[FleetplanError]) -> None:
    if not text.strip():
        message = f"{label}: empty file, no columns or fields"
        raise error(message)


def read_json(path: str | os.PathLike, what: str = "JSON file", *,
              error: type[FleetplanError] = InvalidValueError) -> Any:
    """A user's JSON file, keys given twice refused."""
    text = read_text(path, what, error=error)
    _refuse_empty(text, str(path), error)
    try:
        return _loads_json(text, path, error)
    except json.JSONDecodeError as problem:
        message = f"{path}: not a readable {what} (line {problem.lineno}: {problem.msg})"
        raise error(message) from None


def read_mapping(path: str | os.PathLike, what: str, *, error: type[FleetplanError] = InvalidValueError,
                 limits: dict[str, int] | None = None) -> dict:
    """A YAML or TOML document (by suffix) as a mapping.

    ``limits`` caps the length of top-level lists (``{"workloads": 500}``) before anything
    else is built from them, so a huge file is refused in about the time it takes to read.
    """
    path = Path(path)
    text = read_text(path, what, error=error, max_bytes=MAX_DOCUMENT_BYTES)
    _refuse_empty(text, str(path), error)
    if path.suffix.lower() == ".toml":
        data = _toml(text, path, error)
    elif text.lstrip().startswith("{") and (parsed := _json_or_none(text, path, error)) is not None:
        data = parsed  # JSON is YAML; its own parser is fifty times faster on a big file
    else:
        data = yaml_mapping(text, str(path), error=error, limits=limits)
    if not isinstance(data, dict):
        message = f"{path}: must be a mapping of fields, got {_kind(data)}"
        raise error(message)
    _check_limits(data, limits or {}, str(path), error)
    return data


def _json_or_none(text: str, path: Path, error: type[FleetplanError]) -> Any:
    """``text`` parsed as JSON (keys given twice refused), or None when it is not JSON."""
    try:
        return _loads_json(text, path, error)
    except json.JSONDecodeError:
        return None


def _loads_json(text: str, path, error: type[FleetplanError]) -> Any:
    """``text`` parsed as JSON; a key given twice raises ``error``, bad JSON JSONDecodeError."""
    try:
        return json.loads(text, object_pairs_hook=_unique_pairs)
    except _DuplicateKey as duplicate:
        message = f"{path}: duplicate key '{duplicate.args[0]}'"
        raise error(message) from None


def _kind(data: Any) -> str:
    return "an empty file" if data is None else type(data).__name__


def _toml(text: str, path: Path, error: type[FleetplanError]) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as problem:
        message = f"{path}: invalid TOML: {problem}"
        raise error(message) from None


def _check_limits(data: dict, limits: dict[str, int], label: str, error: type[FleetplanError]) -> None:
    for key, most in limits.items():
        value = data.get(key)
        if isinstance(value, list) and len(value) > most:
            message = f"{label}: {key}: at most {most} entries, got {len(value):,}"
            raise error(message)


class _DuplicateKey(Exception):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict:
    data: dict = {}
    for key, value in pairs:
        if key in data:
            raise _DuplicateKey(key)
        data[key] = value
    return data


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml parses when present
    """Safe YAML that refuses a key given twice."""

    def construct_mapping(self, node, deep=False):
        first_line: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str | int | float | bool):
                continue
            if key in first_line:
                message = f"duplicate key '{key}' (first at line {first_line[key]})"
                raise yaml.constructor.ConstructorError(None, None, message, key_node.start_mark)
            first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def yaml_mapping(text: str, label: str, *, error: type[FleetplanError] = InvalidValueError,
                 limits: dict[str, int] | None = None) -> Any:
    """Load YAML ``text`` strictly: duplicate keys and alias bombs are one ``error`` line.

    >>> yaml_mapping("a: 1\\nb: [2, 3]", "x.yaml")
    {'a': 1, 'b': [2, 3]}
    """
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_node_limits(node, limits or {}, label, error)
        _check_expansion(node, label, error)
        return loader.construct_document(node)
    except yaml.YAMLError as problem:
        mark = getattr(problem, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        what = getattr(problem, "problem", None) or "not valid YAML"
        message = f"{label}: {where}invalid YAML: {what}"
        raise error(message) from None
    finally:
        loader.dispose()


def _check_node_limits(node, limits: dict[str, int], label: str, error: type[FleetplanError]) -> None:
    if not isinstance(node, yaml.MappingNode):
        return
    for key_node, value_node in node.value:
        most = limits.get(getattr(key_node, "value", None))
        if most is not None and isinstance(value_node, yaml.SequenceNode) and len(value_node.value) > most:
            message = f"{label}: {key_node.value}: at most {most} entries, got {len(value_node.value):,}"
            raise error(message)


def _check_expansion(root, label: str, error: type[FleetplanError]) -> None:
    """Count the nodes ``root`` stands for with every alias expanded, without expanding them."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if not children_done and id(node) in open_nodes:
            message = f"{label}: a YAML alias refers to itself"
            raise error(message)
        open_nodes.add(id(node))
        if children_done or not children:
            sizes[id(node)] = 1 + sum(sizes.get(id(child), 0) for child in children)
            if sizes[id(node)] > MAX_YAML_NODES:
                message = (f"{label}: YAML aliases expand to more than {MAX_YAML_NODES:,} values; "
                           "too many aliases")
                raise error(message)
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)


def _children(node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
