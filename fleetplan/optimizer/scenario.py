"""The scenario file: workloads, fleet options and solver settings, validated by pydantic.

A scenario is YAML (or TOML). Unknown fields are errors, every error is one line naming the
field path (``scenario.yaml: workloads[0].tpot_slo_ms: must be > 0, got -5``).
``scenario_json_schema()`` is what ``fleetplan schema`` prints for editors.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema, field_validator, model_validator

from fleetplan.catalogs.conventions import HOURS_PER_MONTH, PRICING_TYPES
from fleetplan.catalogs.prices import (
    DEFAULT_MAX_PRICE_AGE_DAYS,
    DEFAULT_PRICE_RULE,
    parse_price_rule,
)
from fleetplan.errors import did_you_mean
from fleetplan.optimizer.profile_checks import (
    PROFILE_SCHEMA,
    check_profile,
    check_profile_cycle,
)
from fleetplan.optimizer.scenario_current import CurrentGpus
from fleetplan.optimizer.strict_model import StrictModel
from fleetplan.optimizer.supply_inputs import HostedApi, Site, unique_names
from fleetplan.optimizer.uncertainty_inputs import (
    DemandScenario,
    Stochastic,
    check_joint_scenarios,
    check_quantiles,
    check_risk_needs_scenarios,
    check_scenario_set,
)

PricingType = Literal[(*PRICING_TYPES, "purchase")]
SolverName = Literal["auto", "highs", "cbc"]

#: Most workloads one scenario may hold: the MILP grows with workloads x configurations.
MAX_WORKLOADS = 500
#: Largest availability cap [GPUs] and own price [USD/GPU-hour] a scenario may give (the price
#: bound is the prices catalog's).
MAX_GPUS = 1_000_000
MAX_USD_PER_GPU_HOUR = 1000.0

class RequestBucket(StrictModel):
    """One bucket of a request-size histogram."""

    input_tokens: int = Field(gt=0, le=10_000_000, description="Prompt tokens per request")
    output_tokens: int = Field(gt=0, le=10_000_000, description="Output tokens per request")
    weight: float = Field(gt=0, le=1e6, description="Relative share of requests (normalized to sum 1)")


class Workload(StrictModel):
    """A stream of requests to one model with its latency promises."""

    name: str = Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.\-]+$")
    model: str = Field(min_length=1, description="Model id (models catalog)")
    requests_per_s: float | None = Field(None, gt=0, le=1e7, description="Mean demand [requests/s]")
    tokens_per_s: float | None = Field(None, gt=0, le=1e10, description="Mean demand [tokens/s]")
    tokens_per_month: float | None = Field(None, gt=0, le=1e16, description="Demand [tokens/month]")
    token_basis: Literal["total", "output"] = Field(
        "total", description="Whether token demand counts prompt + output or output tokens only")
    input_tokens: int | None = Field(None, gt=0, le=10_000_000,
                                     description="Mean prompt tokens per request")
    output_tokens: int | None = Field(None, gt=0, le=10_000_000,
                                      description="Mean output tokens per request")
    histogram: list[RequestBucket] | None = Field(
        None, min_length=1, max_length=400, description="Request sizes as weighted buckets")
    tpot_slo_ms: float | None = Field(None, gt=0, le=1e5, description="Time per output token SLO [ms]")
    ttft_slo_ms: float | None = Field(None, gt=0, le=1e6, description="Time to first token SLO [ms]")
    quants: list[str] = Field(["bf16"], min_length=1, description="Allowed quantizations")
    hourly_profile: Annotated[Any, WithJsonSchema(PROFILE_SCHEMA)] = None
    monthly_growth: float = Field(0.0, gt=-1, le=10,
                                  description="Demand growth per month [fraction; 0.05 = 5 %]")
    redundancy_k: int = Field(0, ge=0, le=1000, description="Spare replicas kept (N+k)")
    team: str | None = Field(None, min_length=1, max_length=80,
                             description="Team charged for this workload (chargeback)")
    cost_center: str | None = Field(None, min_length=1, max_length=80,
                                    description="Cost center charged for this workload (chargeback)")
    demand_scenarios: list[DemandScenario] | None = Field(
        None, min_length=1, description="Demand outcomes with probabilities (uncertainty_inputs)")
    demand_quantiles: dict[str, float] | None = Field(
        None, description="P10/P50/P90 demand factors, probabilities 0.3/0.4/0.3 (Swanson)")

    _scenario_set = field_validator("demand_scenarios")(check_scenario_set)
    _quantiles = field_validator("demand_quantiles")(check_quantiles)

    @field_validator("hourly_profile")
    @classmethod
    def _profile(cls, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        if not isinstance(value, list):
            message = f"must be a list of numbers or a CSV path, got {value!r}"
            raise ValueError(message)
        return check_profile(value)

    @model_validator(mode="after")
    def _one_demand_and_sizes(self) -> Workload:
        given = [n for n in ("requests_per_s", "tokens_per_s", "tokens_per_month")
                 if getattr(self, n) is not None]
        if len(given) != 1:
            message = ("give exactly one of requests_per_s, tokens_per_s, tokens_per_month, "
                       f"got {', '.join(given) or 'none'}")
            raise ValueError(message)
        has_means = self.input_tokens is not None or self.output_tokens is not None
        if has_means == (self.histogram is not None):
            message = "give either input_tokens and output_tokens, or a histogram"
            raise ValueError(message)
        if has_means and (self.input_tokens is None or self.output_tokens is None):
            message = "give both input_tokens and output_tokens"
            raise ValueError(message)
        if self.demand_scenarios is not None and self.demand_quantiles is not None:
            message = "give either demand_scenarios or demand_quantiles, not both"
            raise ValueError(message)
        return self

    def buckets(self) -> list[tuple[int, int, float]]:
        """Request buckets as (input tokens, output tokens, share of requests)."""
        if self.histogram is None:
            return [(int(self.input_tokens), int(self.output_tokens), 1.0)]
        total = sum(b.weight for b in self.histogram)
        return [(b.input_tokens, b.output_tokens, b.weight / total) for b in self.histogram]


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


class WhatIf(StrictModel):
    """Re-solves that price binding constraints (marginal values)."""

    enabled: bool = Field(True, description="Measure savings of relaxing binding constraints")
    tpot_slo_factor: float = Field(1.5, gt=1, le=100,
                                   description="Looser TPOT SLO tried per workload (x SLO)")
    time_limit_s: float = Field(10.0, gt=0, le=86400, description="Time limit of each re-solve [s]")


class SolverOptions(StrictModel):
    time_limit_s: float = Field(60.0, gt=0, le=86400,
                                description="Time limit of the whole optimization [s]; for "
                                            "fleetplan plan, of the whole command, from "
                                            "its start to the plan written")
    mip_gap: float = Field(5e-3, ge=0, lt=1,
                           description="Relative gap to the proven bound accepted as optimal")
    solver: SolverName = Field("auto", description="auto (HiGHS, else CBC), highs or cbc")
    threads: int | None = Field(None, ge=1, le=1024, description="Solver threads")


class Chargeback(StrictModel):
    """Who pays for capacity no workload uses: N+k spares, rounding up to whole replicas and
    nodes (fleetplan.optimizer.chargeback)."""

    spare: str = Field("usage", description="'usage' (in proportion to the capacity each workload "
                                            "uses), 'even' (equal shares per team) or 'owner:TEAM'")

    @field_validator("spare")
    @classmethod
    def _rule(cls, value: str) -> str:
        if value in ("usage", "even") or (value.startswith("owner:") and value[6:].strip()):
            return value
        message = f"must be usage, even or owner:TEAM, got {value!r}"
        raise ValueError(message)


class Scenario(StrictModel):
    """A fleet planning question."""

    name: str = Field("scenario", min_length=1, max_length=120)
    description: str = ""
    workloads: list[Workload] = Field(min_length=1, max_length=MAX_WORKLOADS)
    fleet: Fleet
    capacity_profiles: str | None = Field(
        None, description="CSV of measured max requests/s per replica (replaces the model)")
    catalogs: list[str] = Field([], description="Catalog override files (CSV or XLSX)")
    solver: SolverOptions = SolverOptions()
    what_if: WhatIf = WhatIf()
    chargeback: Chargeback = Chargeback()

    @field_validator("chargeback")
    @classmethod
    def _owner_is_a_team(cls, chargeback: Chargeback, info) -> Chargeback:
        teams = {w.team for w in info.data.get("workloads") or ()} - {None}
        owner = chargeback.spare.removeprefix("owner:")
        if chargeback.spare.startswith("owner:") and owner not in teams:
            problem = did_you_mean(owner, teams, kind="team") if teams else "no workload names a team"
            message = f"spare: {problem}"
            raise ValueError(message)
        return chargeback

    @field_validator("workloads")
    @classmethod
    def _unique_names(cls, workloads: list[Workload]) -> list[Workload]:
        seen: set[str] = set()
        for workload in workloads:
            if workload.name in seen:
                message = f"workload names must be unique, '{workload.name}' repeats"
                raise ValueError(message)
            seen.add(workload.name)
        return workloads

    @model_validator(mode="after")
    def _profiles_share_a_cycle(self) -> Scenario:
        check_profile_cycle(self.workloads)
        check_joint_scenarios(self.workloads)
        check_risk_needs_scenarios(self.fleet.stochastic, self.workloads)
        return self

    @field_validator("fleet")
    @classmethod
    def _unique_gpus(cls, fleet: Fleet) -> Fleet:
        ids = [g.id.lower() for g in fleet.gpus]
        repeated = sorted({i for i in ids if ids.count(i) > 1})
        if repeated:
            message = f"gpus: each GPU once, '{repeated[0]}' repeats"
            raise ValueError(message)
        return fleet


def scenario_json_schema() -> dict:
    """JSON Schema of the scenario file."""
    schema = Scenario.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "fleetplan scenario"
    return schema
