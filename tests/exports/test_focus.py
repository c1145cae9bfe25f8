"""The FOCUS CSV: its columns and types against the specification's own list, its allowed
values, its sums against the plan, and its text made formula-safe."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re

import numpy as np
import pandas as pd
import pytest

from fleetplan.errors import InvalidValueError
from fleetplan.exports.focus import focus_table, write_focus_csv
from fleetplan.optimizer.chargeback import chargeback_table
from tests.optimizer.chargeback_plans import shared_problem, solved

# FOCUS v1.2 columns: Column ID, Data type, Feature level, Allows nulls, read from the "Content
# constraints" table of each file under specification/columns/ (order: columns.mdpp) of
# github.com/FinOps-Open-Cost-and-Usage-Spec/FOCUS_Spec, tag v1.2, commit
# 7296e3146fb931ee32b6496fa6e4200e7f4384f7.
SPEC_V1_2 = """\
AvailabilityZone,String,Recommended,True
BilledCost,Decimal,Mandatory,False
BillingAccountId,String,Mandatory,False
BillingAccountName,String,Mandatory,True
BillingAccountType,String,Conditional,False
BillingCurrency,String,Mandatory,False
BillingPeriodEnd,Date/Time,Mandatory,False
BillingPeriodStart,Date/Time,Mandatory,False
CapacityReservationId,String,Conditional,True
CapacityReservationStatus,String,Conditional,True
ChargeCategory,String,Mandatory,False
ChargeClass,String,Mandatory,True
ChargeDescription,String,Mandatory,True
ChargeFrequency,String,Recommended,False
ChargePeriodEnd,Date/Time,Mandatory,False
ChargePeriodStart,Date/Time,Mandatory,False
CommitmentDiscountCategory,String,Conditional,True
CommitmentDiscountId,String,Conditional,True
CommitmentDiscountName,String,Conditional,True
CommitmentDiscountQuantity,Decimal,Conditional,True
CommitmentDiscountStatus,String,Conditional,True
CommitmentDiscountType,String,Conditional,True
CommitmentDiscountUnit,String,Conditional,True
ConsumedQuantity,Decimal,Conditional,True
ConsumedUnit,String,Conditional,True
ContractedCost,Decimal,Mandatory,False
ContractedUnitPrice,Decimal,Conditional,True
EffectiveCost,Decimal,Mandatory,False
InvoiceId,String,Recommended,True
InvoiceIssuerName,String,Mandatory,False
ListCost,Decimal,Mandatory,False
ListUnitPrice,Decimal,Conditional,True
PricingCategory,String,Conditional,True
PricingCurrency,String,Conditional,True
PricingCurrencyContractedUnitPrice,Decimal,Conditional,True
PricingCurrencyEffectiveCost,Decimal,Conditional,True
PricingCurrencyListUnitPrice,Decimal,Conditional,True
PricingQuantity,Decimal,Mandatory,True
PricingUnit,String,Mandatory,True
ProviderName,String,Mandatory,False
PublisherName,String,Mandatory,False
RegionId,String,Conditional,True
RegionName,String,Conditional,True
ResourceId,String,Conditional,True
ResourceName,String,Conditional,True
ResourceType,String,Conditional,True
ServiceCategory,String,Mandatory,False
ServiceName,String,Mandatory,False
ServiceSubcategory,String,Recommended,False
SkuId,String,Conditional,True
SkuMeter,String,Conditional,True
SkuPriceDetails,JSON,Conditional,True
SkuPriceId,String,Conditional,True
SubAccountId,String,Conditional,True
SubAccountName,String,Conditional,True
SubAccountType,String,Conditional,True
Tags,JSON,Conditional,True
"""
SPEC = pd.read_csv(io.StringIO(SPEC_V1_2), names=["column", "type", "level", "nullable"])
# Allowed values, from the same files' "Allowed values" tables.
ALLOWED = {
    "ChargeCategory": {"Usage", "Purchase", "Tax", "Credit", "Adjustment"},
    "ChargeClass": {"Correction"},
    "ChargeFrequency": {"One-Time", "Recurring", "Usage-Based"},
    "PricingCategory": {"Standard", "Dynamic", "Committed", "Other"},
    "CommitmentDiscountCategory": {"Spend", "Usage"},
    "CommitmentDiscountStatus": {"Used", "Unused"},
    "ServiceCategory": {"AI and Machine Learning", "Analytics", "Business Applications", "Compute",
                        "Databases", "Developer Tools", "Multicloud", "Identity", "Integration",
                        "Internet of Things", "Management and Governance", "Media", "Migration",
                        "Mobile", "Networking", "Security", "Storage", "Web", "Other"},
}
# NumericFormat: integer, decimal or E notation without a '+'; DateTimeFormat: YYYY-MM-DDTHH:mm:ssZ.
NUMERIC = re.compile(r"-?\d+(\.\d+)?(E-?\d+)?", re.IGNORECASE)
DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
START = dt.date(2027, 1, 1)


def reserved_plan():
    """A year of three equal periods needing 3, 2 and 1 replicas: reserved at $0.50 vs on-demand
    at $1.10 per GPU-hour, 2 reserved replicas (one idle in the quiet period) plus 1 on-demand
    at the peak is cheapest ($4.10 per period-hour against $4.50 and $4.80)."""
    problem = shared_problem(demand=((12.0, 12.0), (8.0, 8.0), (3.0, 3.0)),
                             hours=(2920.0, 2920.0, 2920.0),
                             offers=(("g", "reserved_1y", 0.5), ("g", "on_demand", 1.1)),
                             horizon_months=12.0, month_weight=12.0)
    plan = solved(problem)
    plan.scenario["name"] = "reserved"
    return plan


def fixed_cost_plan():
    """Three months of one configuration with a fixed cost of $250 per configuration-month."""
    problem = shared_problem(hours=(2190.0,), horizon_months=3.0, month_weight=3.0)
    plan = solved(problem.with_changes(config_fixed_usd_per_month=250.0))
    plan.scenario["name"] = "fixed"
    return plan


@pytest.fixture(scope="module")
def focus_files(tmp_path_factory, example_plan, stress_plan):
    folder = tmp_path_factory.mktemp("focus")
    plans = {"example": example_plan, "stress": stress_plan, "reserved": reserved_plan(),
             "fixed": fixed_cost_plan()}
    return {name: (plan, write_focus_csv(plan, folder / f"{name}.csv", START))
            for name, plan in plans.items()}


def raw_rows(path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="", encoding="utf-8") as stream:
        reader = csv.DictReader(stream)
        return list(reader.fieldnames or []), list(reader)


@pytest.mark.parametrize("name", ["example", "stress", "reserved", "fixed"])
def test_columns_and_types_match_the_specification(focus_files, name):
    header, rows = raw_rows(focus_files[name][1])
    assert header == list(SPEC["column"])
    assert rows
    for spec in SPEC.itertuples():
        values = [row[spec.column] for row in rows]
        present = [v for v in values if v != ""]
        if not spec.nullable:
            assert len(present) == len(values), spec.column
        if spec.type == "Decimal":
            assert all(NUMERIC.fullmatch(v) for v in present), (spec.column, present[:3])
        elif spec.type == "Date/Time":
            assert all(DATE_TIME.fullmatch(v) for v in present), spec.column
        elif spec.type == "JSON":
            assert all(isinstance(json.loads(v), dict) for v in present), spec.column
        if spec.column in ALLOWED:
            assert set(present) <= ALLOWED[spec.column], spec.column


@pytest.mark.parametrize("name", ["example", "stress", "reserved", "fixed"])
def test_billed_and_effective_cost_sum_to_the_plan_to_the_cent(focus_files, name):
    plan, path = focus_files[name]
    table = pd.read_csv(path)
    total = round(plan.objective_usd * 100)
    assert round(table["BilledCost"].sum() * 100) == total
    assert round(table["EffectiveCost"].sum() * 100) == total
    assert np.allclose(table["BilledCost"] * 100, np.rint(table["BilledCost"] * 100))


@pytest.mark.parametrize("name", ["example", "stress", "reserved", "fixed"])
def test_months_agree_with_the_chargeback(focus_files, name):
    plan, path = focus_files[name]
    table = pd.read_csv(path)
    focus = table.groupby("BillingPeriodStart")["BilledCost"].sum().to_numpy()
    charged = chargeback_table(plan).groupby("month")["usd"].sum().to_numpy()
    assert len(focus) == len(charged) == len(plan.costs_by_month)
    assert np.abs(focus - charged).max() <= 0.011
    assert np.abs(focus - plan.costs_by_month["usd"].to_numpy()).max() <= 0.011


def test_a_commitment_is_purchased_then_used_and_unused(focus_files):
    plan, path = focus_files["reserved"]
    table = pd.read_csv(path)
    committed = table[table["CommitmentDiscountId"].notna()]
    assert set(committed["PricingCategory"]) == {"Standard", "Committed"}
    assert set(committed["CommitmentDiscountStatus"].dropna()) == {"Used", "Unused"}
    for (_, _), rows in committed.groupby(["CommitmentDiscountId", "BillingPeriodStart"]):
        purchase = rows[rows["ChargeCategory"] == "Purchase"]
        usage = rows[rows["ChargeCategory"] == "Usage"]
        assert len(purchase) == 1 and purchase["ChargeFrequency"].iloc[0] == "Recurring"
        assert purchase["EffectiveCost"].iloc[0] == 0 and usage["BilledCost"].eq(0).all()
        assert usage["EffectiveCost"].sum() == pytest.approx(purchase["BilledCost"].iloc[0], abs=1e-9)
        assert usage["PricingQuantity"].sum() == pytest.approx(purchase["PricingQuantity"].iloc[0])
        unused = usage[usage["CommitmentDiscountStatus"] == "Unused"]
        assert unused["ConsumedQuantity"].isna().all() and (unused["PricingQuantity"] > 0).all()
    on_demand = table[table["CommitmentDiscountId"].isna()]
    assert set(on_demand["ChargeCategory"]) == {"Usage"} and len(on_demand) == 12
    assert plan.objective_usd == pytest.approx(4.1 * 2920)


def test_costs_are_unit_price_times_quantity(focus_files):
    for plan, path in focus_files.values():
        table = pd.read_csv(path)
        assert np.allclose(table["ListCost"], table["ListUnitPrice"] * table["PricingQuantity"], rtol=1e-9)
        assert np.allclose(table["ContractedCost"], table["ContractedUnitPrice"] * table["PricingQuantity"],
                           rtol=1e-9)
        assert (table["ListCost"] >= table["EffectiveCost"] - 0.01).all()  # list price: on demand


def test_periods_are_calendar_months_from_the_start(focus_files):
    table = pd.read_csv(focus_files["example"][1])
    starts = sorted(table["BillingPeriodStart"].unique())
    assert starts[0] == "2027-01-01T00:00:00Z" and starts[-1] == "2027-12-01T00:00:00Z"
    assert (table["ChargePeriodEnd"] > table["ChargePeriodStart"]).all()
    last = table[table["BillingPeriodStart"] == starts[-1]]
    assert set(last["BillingPeriodEnd"]) == {"2028-01-01T00:00:00Z"}


def test_text_never_becomes_a_formula(tmp_path, stress_plan):
    plan = stress_plan
    hostile = plan.prices.assign(provider='=HYPERLINK("http://x","y")', origin="catalog")
    plan = type(plan)(**{**plan.__dict__, "prices": hostile})
    _, rows = raw_rows(write_focus_csv(plan, tmp_path / "focus.csv", START))
    fields = [value for row in rows for value in row.values()]
    assert not [v for v in fields if v[:1] in ("=", "+", "@", "\t", "\r", "\n")]
    assert {row["ProviderName"] for row in rows} == {"'=HYPERLINK(\"http://x\",\"y\")"}


def test_a_plan_without_solution_writes_the_header_only(tmp_path, example_plan):
    plan = type(example_plan)(**{**example_plan.__dict__, "objective_usd": float("nan")})
    assert focus_table(plan, START).empty
    header, rows = raw_rows(write_focus_csv(plan, tmp_path / "empty.csv", START))
    assert header == list(SPEC["column"]) and rows == []


def test_a_missing_folder_is_refused(tmp_path, example_plan):
    with pytest.raises(InvalidValueError, match="output folder .* does not exist"):
        write_focus_csv(example_plan, tmp_path / "missing" / "focus.csv", START)
