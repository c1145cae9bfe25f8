"""The scenario file's ``fleet``: the GPU types a plan may use, with their prices, caps and lead
times, and the fleet-wide limits and settings (pricing, price rule, budget, horizon, power
sites, hosted APIs, today's GPUs, financing of purchases), validated by pydantic as part of
:class:`fleetplan.optimizer.scenario.Scenario`.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from fleetplan.catalogs.conventions import HOURS_PER_MONTH, PRICING_TYPES
from fleetplan.catalogs.prices import (
    DEFAULT_MAX_PRICE_AGE_DAYS,
    DEFAULT_PRICE_RULE,
    parse_price_rule,
)
from fleetplan.optimizer.scenario_current import CurrentGpus
from fleetplan.optimizer.strict_model import StrictModel
from fleetplan.optimizer.supply_inputs import HostedApi, Site, unique_names
from fleetplan.optimizer.uncertainty_inputs import Stochastic

PricingType = Literal[(*PRICING_TYPES, "purchase")]

#: Largest availability cap [GPUs] and own price [USD/GPU-hour] a scenario may give (the price
#: bound is the prices catalog's).
MAX_GPUS = 1_000_000
MAX_USD_PER_GPU_HOUR = 1000.0


class GpuOption(StrictModel):
    """A GPU type the fleet may use, with its own pricing options and caps."""

    id: str = Field(min_length=1, description="GPU id (gpus catalog)")
    pricing: list[PricingType] | None = Field(
        None, min_length=1, description="Pricing types allowed for this GPU (default: fleet's)")
    max_gpus: int | None = Field(None, ge=0, le=MAX_GPUS, description="Availability cap at any time [GPUs]")
    max_gpus_by_pricing: dict[PricingType, int] | None = Field(
        None, description="Availability cap per pricing type [GPUs]")
    gpus_per_node: int | None = Field(None, ge=1, le=1024,
                                      description="Node size when buying whole nodes [GPUs]")
    usd_per_gpu_hour: dict[PricingType, float] | None = Field(
        None, description="Own prices per pricing type [USD/GPU-hour], replacing the catalog's")
    provider: str | None = Field(None, description="Price rows from this provider only")
    region: str | None = Field(None, description="Price rows from this region only")
    lead_time_months: int | None = Field(
        None, ge=0, le=120, description="First month (0 = the plan's first) from which new GPUs "
                                        "of this type can be had (fleetplan.optimizer.lead_times)")
    lead_time_pricing: list[PricingType] | None = Field(
        None, min_length=1, description="Pricing types the lead time and monthly cap apply to "
                                        "(default: every pricing type of new GPUs)")
    max_new_gpus_per_month: int | None = Field(
        None, ge=0, le=MAX_GPUS, description="Most GPUs of this type added in one month [GPUs]")

    @model_validator(mode="before")
    @classmethod
    def _from_id(cls, value: Any) -> Any:
        return {"id": value} if isinstance(value, str) else value

    @field_validator("usd_per_gpu_hour", "max_gpus_by_pricing")
    @classmethod
    def _positive(cls, value: dict | None, info) -> dict | None:
        high = MAX_USD_PER_GPU_HOUR if info.field_name == "usd_per_gpu_hour" else MAX_GPUS
        for pricing, number in (value or {}).items():
            if not math.isfinite(number):
                message = f"{pricing}: must be a finite number, got {number}"
                raise ValueError(message)
            if number < 0 or number > high:
                bound = ">= 0" if number < 0 else f"<= {high:g}"
                message = f"{pricing}: must be {bound}, got {number:g}"
                raise ValueError(message)
        return value


class Disaggregation(StrictModel):
    """Prefill/decode pairs offered to the optimizer next to colocated replicas: prompts on a
    prefill pool, generation on a decode pool (possibly another GPU type), the KV cache moved
    between them."""

    prefill_gpus: list[str] | None = Field(
        None, min_length=1, description="GPU ids for prefill pools (default: every fleet GPU)")
    decode_gpus: list[str] | None = Field(
        None, min_length=1, description="GPU ids for decode pools (default: every fleet GPU)")
    prefill_tp: list[int] | None = Field(
        None, min_length=1, description="TP degrees of prefill replicas (default: fleet.tp)")
    decode_tp: list[int] | None = Field(
        None, min_length=1, description="TP degrees of decode replicas (default: fleet.tp)")
    colocated: bool = Field(True, description="Keep colocated replicas as candidates too")

    @field_validator("prefill_tp", "decode_tp")
    @classmethod
    def _tp(cls, values: list[int] | None) -> list[int] | None:
        return None if values is None else _tp_degrees(values)


def _tp_degrees(values: list[int]) -> list[int]:
    for value in values:
        if value < 1 or value > 1024:
            message = f"must be whole numbers between 1 and 1024, got {value}"
            raise ValueError(message)
    return sorted(set(values))


class Fleet(StrictModel):
    """What the fleet may be built from, and the limits it must respect."""

    gpus: list[GpuOption] = Field(min_length=1, description="Allowed GPU types")
    tp: list[int] = Field([1, 2, 4, 8], min_length=1, description="Allowed tensor-parallel degrees")
    pricing: list[PricingType] = Field(["on_demand"], min_length=1,
                                       description="Pricing types allowed by default")
    provider: str | None = Field(None, description="Take catalog prices from this provider only")
    region: str | None = Field(None, description="Take catalog prices from this region only")
    price_rule: str = Field(DEFAULT_PRICE_RULE, description="Which catalog price: cheapest, median or "
                                                            "provider:NAME (fleetplan.catalogs.prices)")
    max_price_age_days: int = Field(DEFAULT_MAX_PRICE_AGE_DAYS, ge=0, description="Warn about older prices [days]")
    mix_providers: bool = Field(False, description="Choose each pricing type's price on its own instead "
                                                   "of from the on-demand price's provider")
    spot_max_share: float | None = Field(None, ge=0, le=1,
                                         description="Largest share of GPUs that may be spot")
    whole_nodes: bool = Field(False, description="Buy GPUs in whole nodes (gpus_per_node)")
    max_configs_per_workload: int | None = Field(
        None, ge=1, le=1000, description="Most configurations (GPU, quantization, TP; a "
                                         "disaggregated pair counts once) one workload may use")
    one_quant_per_model: bool = Field(False, description="Run every model in one quantization")
    budget_usd_per_month: float | None = Field(None, gt=0, le=1e10, description="Budget cap [USD/month]")
    reserved_beyond_horizon: Literal["charge", "forbid"] = Field(
        "charge", description="A reserved term longer than the horizon: 'charge' its whole term "
                              "(spread over the horizon) or 'forbid' that pricing type")
    target_utilization: float = Field(0.8, gt=0, le=1,
                                      description="Share of a replica's capacity planned")
    horizon_months: int = Field(12, ge=1, le=120, description="Planning horizon [months]")
    hours_per_month: float = Field(HOURS_PER_MONTH, gt=0, le=744, description="Hours in a month [h]")
    share_replicas: bool = Field(True, description="Workloads of one model may share replicas")
    capacity_model: Literal["load", "knee"] = Field(
        "load", description="Replica capacity: 'load' = the largest request rate whose loaded TPOT and TTFT "
                            "meet the SLOs (queueing model); 'knee' = the rate at the largest batch meeting them")

    engine: str | None = Field(
        None, min_length=1, description="Serving engine whose efficiency rows to use (e.g. from fleetplan "
                                        "calibrate); default: the catalog's * rows")
    capacity_quantile: Literal["p50", "p90"] = Field(
        "p50", description="Replica capacity as modelled (p50) or divided by 1 + the p90 of the calibration "
                           "error band of rows like it (p90: a pessimistic plan)")
    disaggregation: Disaggregation | None = Field(
        None, description="Also offer prefill/decode disaggregated pairs as candidates")
    stochastic: Stochastic = Field(
        Stochastic(), description="Objective under workloads' demand scenarios")
    sites: list[Site] = Field([], max_length=100, description="Data halls with a power envelope")
    apis: list[HostedApi] = Field([], max_length=100,
                                  description="Hosted model APIs that may serve workloads")

    @field_validator("sites")
    @classmethod
    def _unique_sites(cls, sites: list[Site]) -> list[Site]:
        return unique_names(sites, "site")

    @field_validator("apis")
    @classmethod
    def _unique_apis(cls, apis: list[HostedApi]) -> list[HostedApi]:
        return unique_names(apis, "api")
    current: list[CurrentGpus] | None = Field(
        None, max_length=10_000, description="GPUs deployed today (fleetplan.optimizer.current_fleet)")
    start_date: dt.date | None = Field(None, description="Date of the plan's first month (for end dates)")
    energy_usd_per_kwh: float = Field(
        0.10, ge=0, le=10, description="Electricity price of owned and purchased servers [USD/kWh]")
    cost_of_capital: float = Field(
        0.0, ge=0, le=1, allow_inf_nan=False,
        description="Annual cost of capital (discount rate) of purchased servers: their price is "
                    "recovered over their life at this rate [fraction per year]; 0 = straight-line")
    residual_value: float = Field(
        0.0, ge=0, le=1, allow_inf_nan=False,
        description="What a purchased server sells for at the end of its life [fraction of its "
                    "price]")
    max_changes_per_month: int | None = Field(
        None, ge=0, le=MAX_GPUS, description="Most GPUs bought, released or moved to another "
                                             "configuration in one month [GPUs]")
    min_committed_gpus: int | None = Field(
        None, ge=0, le=MAX_GPUS, description="GPUs held under commitment (committed, owned, "
                                             "reserved, purchase) in every month, at least [GPUs]")
    config_fixed_usd_per_month: float | None = Field(
        None, ge=0, le=1e9, allow_inf_nan=False,
        description="Operating overhead of each configuration (GPU, model, quantization, TP, "
                    "engine; a prefill/decode pair counts both) in every month it has a "
                    "replica [USD per configuration and month]; none or 0 = off")

    @field_validator("tp")
    @classmethod
    def _tp(cls, values: list[int]) -> list[int]:
        return _tp_degrees(values)

    @field_validator("price_rule")
    @classmethod
    def _price_rule(cls, value: str) -> str:
        return parse_price_rule(value)
