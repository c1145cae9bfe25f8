"""The scenario's ``fleet.current`` rows: GPUs the company already has when it plans.

Kept apart from ``scenario.py`` because the same rows come from a CSV (``fleetplan plan
--current fleet.csv``, read by ``current_fleet.read_current_csv``): one model validates both.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from fleetplan.catalogs.conventions import EXISTING_PRICING
from fleetplan.optimizer.strict_model import StrictModel

#: Largest count one row may give [GPUs] (the scenario's availability cap bound).
MAX_CURRENT_GPUS = 1_000_000

#: Columns of a current-fleet CSV, in the order the docs list them.
CURRENT_COLUMNS = ("gpu", "pricing_type", "count", "model", "quant", "tp", "provider",
                   "end_month", "end_date", "usd_per_month")


class CurrentGpus(StrictModel):
    """GPUs the company has when it plans: a reserved commitment made before the plan
    (``committed``, sunk until its end) or servers it owns (``owned``)."""

    model_config = ConfigDict(protected_namespaces=())  # a field is named "model"

    gpu: str = Field(min_length=1, description="GPU id (gpus catalog); one of fleet.gpus")
    pricing_type: Literal[EXISTING_PRICING] = Field(
        description="committed (reserved before the plan) or owned")
    count: int = Field(gt=0, le=MAX_CURRENT_GPUS, description="GPUs [GPUs]")
    model: str | None = Field(None, min_length=1, description="Model they serve today, if known")
    quant: str | None = Field(None, min_length=1,
                              description="Quantization they serve it in, if known (default bf16)")
    tp: int | None = Field(None, ge=1, le=1024, description="GPUs per replica today, if known")
    provider: str | None = Field(None, description="Who the commitment is with, or where the "
                                                   "servers are")
    end_month: int | None = Field(
        None, ge=0, le=1200, description="First month of the plan (0 = its first) without these "
                                         "GPUs; none = beyond the horizon")
    end_date: dt.date | None = Field(None, description="Date the commitment ends (needs "
                                                       "fleet.start_date)")
    usd_per_month: float | None = Field(
        None, ge=0, le=1e10, description="What these GPUs cost per month [USD/month]: the "
                                         "commitment's sunk fee, or the servers' power and hosting")

    @model_validator(mode="after")
    def _one_end(self) -> CurrentGpus:
        if self.end_month is not None and self.end_date is not None:
            message = "give end_month or end_date, not both"
            raise ValueError(message)
        if (self.model is None) != (self.tp is None):
            message = "give both model and tp to name the configuration the GPUs serve"
            raise ValueError(message)
        return self
