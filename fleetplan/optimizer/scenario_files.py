"""Read a scenario file (YAML or TOML) into a validated :class:`Scenario`.

Every problem becomes one ``ScenarioError`` line: ``<file>: <field path>: <what is wrong>``.
Relative paths inside a scenario (hourly profile CSVs, capacity profiles, catalog overrides)
are resolved against the scenario file's folder.
"""

from __future__ import annotations

import difflib
import typing
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pydantic import BaseModel, ValidationError

from fleetplan.catalogs.input_files import csv_frame, read_mapping, read_text
from fleetplan.errors import ScenarioError, field_pattern
from fleetplan.optimizer.profile_checks import MAX_PROFILE_HOURS, check_profile, check_profile_cycle
from fleetplan.optimizer.scenario import MAX_WORKLOADS, Scenario

_BOUNDS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<",
           "less_than_equal": "<="}
_BOUND_KEYS = {"greater_than": "gt", "greater_than_equal": "ge", "less_than": "lt",
               "less_than_equal": "le"}


#: How a message about a whole mapping, not one of its fields, begins.
TOP_LEVEL = "(top level): "
#: The start of an error message about a scenario's field (``fleet.gpus[0].id: ...``).
SCENARIO_FIELD = field_pattern(Scenario.model_fields)


def field_path(location: tuple) -> str:
    """``('workloads', 0, 'tpot_slo_ms')`` -> ``workloads[0].tpot_slo_ms``."""
    text = ""
    for part in location:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part != "[key]":
            text += f".{part}" if text else str(part)
    return text or TOP_LEVEL.removesuffix(": ")


def _model_at(location: tuple, root: type[BaseModel] = Scenario) -> type[BaseModel] | None:
    """The pydantic model class that holds the last field of ``location`` (from ``root``)."""
    model: Any = root
    for part in location[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if isinstance(model, type) else None
        if field is None:
            return None
        model = _inner_model(field.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _inner_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in typing.get_args(annotation):
        found = _inner_model(argument)
        if found is not None:
            return found
    return None


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


_FIELDS = "must be a mapping of its fields (name: value)"
#: pydantic's wording where it names a class or says "got" itself.
_PLAIN = {"model_type": _FIELDS, "model_attributes_type": _FIELDS, "dataclass_type": _FIELDS,
          "dict_type": "must be a mapping (name: value)",
          "int_from_float": "must be a whole number",
          "int_parsing": "must be a whole number", "int_type": "must be a whole number",
          "float_parsing": "must be a number", "float_type": "must be a number",
          "bool_parsing": "must be true or false", "bool_type": "must be true or false",
          "date_parsing": "must be a date (YYYY-MM-DD)",
          "date_from_datetime_parsing": "must be a date (YYYY-MM-DD)",
          "date_from_datetime_inexact": "must be a date (YYYY-MM-DD) without a time",
          "date_type": "must be a date (YYYY-MM-DD)",
          "int_parsing_size": "must be a whole number of at most 18 digits",
          "string_type": "must be text", "list_type": "must be a list",
          "tuple_type": "must be a list", "set_type": "must be a list",
          "iterable_type": "must be a list"}


def error_message(error: dict, root: type[BaseModel] = Scenario) -> str:
    """One pydantic error as ``<path>: <what is wrong>`` (``root``: the model validated)."""
    kind, location = error["type"], tuple(error["loc"])
    context, value = error.get("ctx", {}), error.get("input")
    path = field_path(location)
    if kind in _BOUNDS:
        bound = context.get(_BOUND_KEYS[kind])
        return f"{path}: must be {_BOUNDS[kind]} {bound:g}, got {_shown(value)}"
    if kind == "missing":
        return f"{path}: is required"
    if kind in ("string_too_short", "string_too_long"):
        limit = context.get("min_length" if kind == "string_too_short" else "max_length")
        if kind == "string_too_short" and limit == 1:
            return f"{path}: must not be blank, got {_shown(value)}"
        most = "at least" if kind == "string_too_short" else "at most"
        return f"{path}: must hold {most} {limit} characters, got {_shown(value)}"
    if kind in ("too_short", "too_long"):
        limit = context.get("min_length" if kind == "too_short" else "max_length")
        what = "entry" if context.get("field_type") == "Dictionary" else "value"
        most = "at least" if kind == "too_short" else "at most"
        plural = "s" if limit != 1 else ""
        return f"{path}: must hold {most} {limit} {what}{plural}, got {_shown(value)}"
    if kind == "extra_forbidden":
        return _unknown_field(location, root)
    if kind == "literal_error":
        return f"{path}: must be {context.get('expected')}, got {_shown(value)}"
    if kind == "value_error":
        return f"{path}: {str(context.get('error', error['msg']))}"
    message = _PLAIN.get(kind) or error["msg"].replace("Input should be", "must be")
    message = message[0].lower() + message[1:]
    return f"{path}: {message}, got {_shown(value)}"


def _unknown_field(location: tuple, root: type[BaseModel] = Scenario) -> str:
    name, model = str(location[-1]), _model_at(location, root)
    valid = sorted(model.model_fields) if model is not None else []
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    listed = f" (valid: {', '.join(valid)})" if valid else ""
    return f"{field_path(location)}: unknown field{hint}{listed}"


def read_data(path: Path) -> dict:
    """The raw mapping in a YAML or TOML file (one-line ScenarioError when unreadable).

    The workload count is checked before anything is built from the file, so a huge file is
    refused quickly.
    """
    return read_mapping(path, "scenario file", error=ScenarioError, limits={"workloads": MAX_WORKLOADS})


def validate_scenario(data: dict, source: str = "scenario") -> Scenario:
    """A Scenario from a mapping, or one ScenarioError line naming the first bad field."""
    try:
        return Scenario.model_validate(data)
    except ValidationError as problem:
        errors = problem.errors()
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        message = f"{source}: {error_message(errors[0])}{more}"
        raise ScenarioError(message) from None


def load_scenario(path: str | Path) -> Scenario:
    """Read, validate and resolve a scenario file."""
    path = Path(path)
    scenario = validate_scenario(read_data(path), source=str(path))
    return resolve_paths(scenario, path.parent, source=str(path))


def resolve_paths(scenario: Scenario, folder: Path, source: str = "scenario") -> Scenario:
    """Read hourly-profile CSVs into the scenario; make other paths absolute."""
    workloads = []
    for index, workload in enumerate(scenario.workloads):
        if isinstance(workload.hourly_profile, str):
            where = f"{source}: workloads[{index}].hourly_profile"
            profile = read_profile_csv(_absolute(workload.hourly_profile, folder), where)
            workload = workload.model_copy(update={"hourly_profile": profile})
        workloads.append(workload)
    try:
        check_profile_cycle(workloads)
    except ValueError as problem:
        message = f"{source}: {problem}"
        raise ScenarioError(message) from None
    profiles = scenario.capacity_profiles
    update = {"workloads": workloads,
              "capacity_profiles": None if profiles is None else str(_absolute(profiles, folder)),
              "catalogs": [str(_absolute(p, folder)) for p in scenario.catalogs]}
    return scenario.model_copy(update=update)


def _absolute(path: str, folder: Path) -> Path:
    candidate = Path(path).expanduser()
    return candidate if candidate.is_absolute() else (folder / candidate).resolve()


def read_profile_csv(path: Path, where: str) -> list[float]:
    """Hourly values from the last numeric column of a CSV (a header row is allowed); with a
    timestamp column, rows are put in time order and must be one hour apart."""
    if not path.is_file():
        message = f"{where}: file not found: {path}"
        raise ScenarioError(message)
    text = read_text(path, "hourly profile", error=ScenarioError)
    label = f"{where}: {path.name}"
    first = csv_frame(text, label, ScenarioError, header=None, nrows=1)
    header = bool(pd.isna(pd.to_numeric(first.iloc[0, -1], errors="coerce")))  # a name, no value
    table = csv_frame(text, label, ScenarioError, header=0 if header else None)
    stamps = _timestamps(table)
    if stamps is not None:
        order = np.argsort(stamps.to_numpy(), kind="stable")
        table, stamps = table.iloc[order], stamps.iloc[order]
        steps = stamps.diff().dropna()
        if (steps != pd.Timedelta(hours=1)).any():
            bad = int(np.flatnonzero((steps != pd.Timedelta(hours=1)).to_numpy())[0]) + 1
            told = (f"{stamps.iloc[bad]} is given twice" if steps.iloc[bad - 1] == pd.Timedelta(0)
                    else f"{stamps.iloc[bad - 1]} is followed by {stamps.iloc[bad]}")
            message = f"{label}: timestamps must be one hour apart, {told}"
            raise ScenarioError(message)
        table = table.drop(columns=stamps.name)
    values = pd.to_numeric(table.iloc[:, -1], errors="coerce") if len(table.columns) else None
    if values is not None and values.isna().any():
        row = int(np.flatnonzero(values.isna().to_numpy())[0])
        line = int(table.index[row]) + (2 if header else 1)
        column = f"{table.columns[-1]}" if header else "the last column"
        message = (f"{where}: {path.name} line {line}: {column} must be a number, "
                   f"got {_shown(table.iloc[row, -1])}")
        raise ScenarioError(message)
    if values is None or not 1 <= len(values) <= MAX_PROFILE_HOURS:
        count = 0 if values is None else len(values)
        message = (f"{where}: {path.name} must hold 1 to {MAX_PROFILE_HOURS} numbers in its "
                   f"last column, got {count}")
        raise ScenarioError(message)
    try:
        return check_profile(values.astype(float).tolist())
    except ValueError as problem:
        message = f"{where}: {path.name}: {problem}"
        raise ScenarioError(message) from None


def _timestamps(table: pd.DataFrame) -> pd.Series | None:
    """The first column that holds date-times in every row, as timestamps (None if none)."""
    for column in table.columns[:-1]:
        if pd.api.types.is_numeric_dtype(table[column]):
            continue
        stamps = pd.to_datetime(table[column], errors="coerce", utc=True, format="ISO8601")
        if stamps.notna().all():
            return stamps.rename(column)
    return None
