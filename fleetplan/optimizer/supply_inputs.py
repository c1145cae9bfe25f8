"""Scenario-file inputs for supply beyond rented GPUs: data halls with a power envelope
(``fleet.sites``) and hosted model APIs (``fleet.apis``)."""

from __future__ import annotations

import datetime as dt

from pydantic import Field, field_validator, model_validator

from fleetplan.catalogs.conventions import ON_PREMISES_PRICING, PRICING_TYPES
from fleetplan.errors import did_you_mean
from fleetplan.optimizer.strict_model import StrictModel


class Site(StrictModel):
    """A data hall with a power envelope: the GPUs of the offers it holds draw on its kW."""

    name: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.\-]+$")
    kw: float = Field(gt=0, le=1e7, description="Power the site may draw [kW]")
    pue: float = Field(1.0, ge=1, le=5, description="Power usage effectiveness: facility kW per "
                                                    "IT kW (1.0: kw is IT power)")
    pricing: list[str] = Field(list(ON_PREMISES_PRICING), min_length=1,
                               description="Pricing types whose GPUs stand on the site")
    gpus: list[str] | None = Field(None, min_length=1,
                                   description="GPU ids on the site (default: every fleet GPU)")

    @field_validator("pricing")
    @classmethod
    def _pricing(cls, values: list[str]) -> list[str]:
        known = (*PRICING_TYPES, *ON_PREMISES_PRICING)
        for value in values:
            if value not in known:
                raise ValueError(str(did_you_mean(value, known, kind="pricing type")))
        return values


class HostedApi(StrictModel):
    """A hosted model API that may serve part of a workload, priced per token."""

    name: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.\-]+$")
    provider: str = Field(min_length=1, max_length=80, description="Who serves the API")
    model: str = Field(min_length=1, description="Model id it serves (models catalog)")
    usd_per_1m_input_tokens: float = Field(ge=0, le=1000, description="Price [USD/1M prompt tokens]")
    usd_per_1m_output_tokens: float = Field(ge=0, le=1000, description="Price [USD/1M output tokens]")
    max_requests_per_min: float | None = Field(None, gt=0, le=1e9,
                                               description="Rate limit [requests/min]")
    max_tokens_per_min: float | None = Field(None, gt=0, le=1e12,
                                             description="Rate limit [prompt + output tokens/min]")
    ttft_ms: float | None = Field(None, gt=0, le=1e6, description="Time to first token, as "
                                                               "published or measured [ms]")
    tpot_ms: float | None = Field(None, gt=0, le=1e5, description="Time per output token, as "
                                                               "published or measured [ms]")
    source: str = Field(min_length=1, description="Where the prices and limits were read")
    as_of: dt.date = Field(description="Date of the prices (YYYY-MM-DD)")

    @model_validator(mode="after")
    def _rate_limit(self) -> HostedApi:
        if self.max_requests_per_min is None and self.max_tokens_per_min is None:
            message = "give max_requests_per_min and/or max_tokens_per_min (the rate limit)"
            raise ValueError(message)
        return self


def unique_names(items: list, kind: str) -> list:
    """``items`` when their names are unique (ValueError naming the first repeat otherwise)."""
    names = [item.name for item in items]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        message = f"{kind} names must be unique, '{repeated[0]}' repeats"
        raise ValueError(message)
    return items
