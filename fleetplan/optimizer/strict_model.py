"""The base of every scenario-file model: unknown fields, non-finite numbers, booleans given for
numbers and bad defaults are errors, each reported as one line naming the field
(``scenario_files.error_message``)."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

NUMBERS = (int, float)


def boolean_for_number(value: Any, annotation: Any) -> bool:
    """Whether ``value`` holds a boolean where ``annotation`` wants a number, at any depth of
    lists and mappings whose shape matches (a list given for a mapping is pydantic's to refuse).
    """
    if annotation in NUMBERS:
        return isinstance(value, bool)
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:  # a type with constraints, such as a list of at least one value
        return boolean_for_number(value, arguments[0])
    if origin in (typing.Union, types.UnionType):
        return bool not in arguments and any(boolean_for_number(value, a) for a in arguments)
    if origin in (list, tuple, set) and isinstance(value, list) and arguments:
        return any(boolean_for_number(item, arguments[0]) for item in value)
    if origin is dict and isinstance(value, dict) and len(arguments) == 2:
        return any(boolean_for_number(item, arguments[1]) for item in value.values())
    return False


class NumbersNotBooleans(BaseModel):
    """Numeric fields refuse ``true``/``false``: pydantic would read them as 1 and 0, so
    ``horizon_months: true`` would plan one month without a word."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if boolean_for_number(value, cls.model_fields[info.field_name].annotation):
            message = f"must be a number, not a boolean, got {value}"
            raise ValueError(message)
        return value


class StrictModel(NumbersNotBooleans):
    """A pydantic model that forbids unknown fields, ``inf``/``nan`` and booleans for numbers,
    and validates defaults."""

    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)
