"""The scenario file: workloads, fleet options (``scenario_fleet.py``) and solver settings,
validated by pydantic.

A scenario is YAML (or TOML). Unknown fields are errors, every error is one line naming the
field path (``scenario.yaml: workloads[0].tpot_slo_ms: must be > 0, got -5``).
``scenario_json_schema()`` is what ``fleetplan schema`` prints for editors.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema, field_validator, model_validator

from fleetplan.errors import did_you_mean
from fleetplan.optimizer.profile_checks import (
    PROFILE_SCHEMA,
    check_profile,
    check_profile_cycle,
)
from fleetplan.optimizer.scenario_fleet import Fleet
from fleetplan.optimizer.strict_model import StrictModel
from fleetplan.optimizer.uncertainty_inputs import (
    DemandScenario,
    check_joint_scenarios,
    check_quantiles,
    check_risk_needs_scenarios,
    check_scenario_set,
)

SolverName = Literal["auto", "highs", "cbc"]

#: Most workloads one scenario may hold: the MILP grows with workloads x configurations.
MAX_WORKLOADS = 500


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
