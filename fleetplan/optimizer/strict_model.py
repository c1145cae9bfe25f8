"""The base of every scenario-file model: unknown fields, non-finite numbers and bad defaults
are errors, each reported as one line naming the field (``scenario_files.error_message``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A pydantic model that forbids unknown fields and ``inf``/``nan`` and validates defaults."""

    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)
