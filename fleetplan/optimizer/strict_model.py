"""The base of every scenario-file model: unknown fields, non-finite numbers, booleans given for
numbers and bad defaults are errors, each reported as one line naming the field
(``scenario_files.error_message``)."""

from __future__ import annotations

import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

NUMBERS = (int, float)


def _types_in(annotation: Any) -> set:
    """Every type an annotation names, through unions, lists and dicts."""
    found = {annotation}
    for argument in typing.get_args(annotation):
        found |= _types_in(argument)
    return found


def _booleans_in(value: Any) -> bool:
    """Whether ``value``, a list's items or a mapping's values hold a boolean."""
    if isinstance(value, bool):
        return True
    items = value.values() if isinstance(value, dict) else value if isinstance(
        value, list) else ()
    return any(isinstance(item, bool) for item in items)


class NumbersNotBooleans(BaseModel):
    """Numeric fields refuse ``true``/``false``: pydantic would read them as 1 and 0, so
    ``horizon_months: true`` would plan one month without a word."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        types = _types_in(cls.model_fields[info.field_name].annotation)
        if bool not in types and types & set(NUMBERS) and _booleans_in(value):
            message = f"must be a number, not a boolean, got {value}"
            raise ValueError(message)
        return value


class StrictModel(NumbersNotBooleans):
    """A pydantic model that forbids unknown fields, ``inf``/``nan`` and booleans for numbers,
    and validates defaults."""

    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)
