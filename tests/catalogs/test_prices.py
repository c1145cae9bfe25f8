"""The one price rule: which row prices a (GPU, pricing type), checked on hand-made tables."""

import datetime as dt

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetplan.catalogs import (
    PriceRule,
    choose_prices,
    load_catalogs,
    parse_price_rule,
    warning_lines,
)
from fleetplan.errors import InvalidValueError

TODAY = dt.date(2026, 11, 23)


def _rows(*rows) -> pd.DataFrame:
    """(gpu, provider, region, pricing type, price, as_of[, override]) tuples as a prices table."""
    frame = pd.DataFrame([(*r, False)[:7] for r in rows],
                         columns=["gpu", "provider", "region", "pricing_type", "usd_per_gpu_hour", "as_of",
                                  "override"])
    return frame.assign(instance="x", includes_host=True, source="page " + frame["provider"])


PRICES = _rows(
    ("h100-sxm", "nebius", "eu", "on_demand", 2.95, "2026-11-22"),
    ("h100-sxm", "lambda", "any", "on_demand", 2.99, "2026-11-22"),
    ("h100-sxm", "aws", "us-east-1", "on_demand", 6.88, "2025-11-30"),
    ("h100-sxm", "aws", "eu-west-2", "on_demand", 15.98, "2026-11-22"),
    ("h100-sxm", "aws", "us-east-1", "reserved_1y", 5.42, "2025-11-30"),
    ("h100-sxm", "nebius", "eu", "spot", 1.25, "2026-11-22"),
    ("h100-sxm", "aws", "us-east-1", "spot", 1.10, "2026-11-22"),
)


def _chosen(prices=PRICES, **rule) -> pd.DataFrame:
    return choose_prices(prices, ["h100-sxm"], rule=PriceRule(**rule), today=TODAY).set_index("pricing_type")


@pytest.mark.parametrize(("choice", "price", "provider"), [
    ("cheapest", 2.95, "nebius"),
    ("median", 2.99, "lambda"),  # four rows: the lower middle one, a real listing
    ("provider:aws", 6.88, "aws"),
])
def test_each_rule_picks_a_real_listing(choice, price, provider):
    row = _chosen(choice=choice).loc["on_demand"]
    assert (row["usd_per_gpu_hour"], row["provider"]) == (price, provider)
    assert row["source"] == f"page {provider}"


def test_other_pricing_types_come_from_the_on_demand_provider_where_it_lists_them():
    chosen = _chosen()
    assert chosen.loc["spot", "provider"] == "nebius"  # not aws's cheaper 1.10
    reserved = chosen.loc["reserved_1y"]  # nebius reserves nothing: aws's, measured against aws
    assert reserved["provider"] == "aws"
    assert reserved["same_provider_on_demand_usd_per_gpu_hour"] == 6.88
    mixed = _chosen(mix_providers=True)
    assert mixed.loc["spot", ["provider", "usd_per_gpu_hour"]].tolist() == ["aws", 1.10]


def test_filters_are_hard_and_a_preferred_provider_falls_back_with_a_warning():
    assert _chosen(region="eu-west-2").loc["on_demand", "usd_per_gpu_hour"] == 15.98
    assert list(_chosen(provider="lambda").index) == ["on_demand"]
    fallback = _chosen(choice="provider:lambda")
    assert fallback.loc["spot", "provider"] == "aws"  # lambda's own row was chosen on demand
    assert "lambda lists no such price" in fallback.loc["spot", "warning"]


def test_the_users_quote_wins_over_cheaper_public_rows():
    quote = _rows(("h100-sxm", "acme", "any", "on_demand", 3.20, "2026-11-01", True))
    prices = pd.concat([PRICES, quote], ignore_index=True)
    for choice in ("cheapest", "median"):
        row = _chosen(prices, choice=choice).loc["on_demand"]
        assert (row["usd_per_gpu_hour"], row["origin"]) == (3.20, "your file")
    assert _chosen(prices, choice="provider:aws").loc["on_demand", "provider"] == "aws"


def test_override_file_marks_its_rows_and_wins(tmp_path):
    path = tmp_path / "my_prices.csv"
    path.write_text("gpu,provider,region,pricing_type,usd_per_gpu_hour,instance,includes_host,source,as_of\n"
                    "mi300x,acme,any,on_demand,3.20,8x MI300X,true,quote 2026-11,2026-11-01\n")
    catalogs = load_catalogs([path])
    assert catalogs.prices["override"].sum() == 1
    row = catalogs.chosen_prices(["mi300x"], ["on_demand"], today=TODAY).iloc[0]
    assert (row["usd_per_gpu_hour"], row["provider"], row["origin"]) == (3.20, "acme", "your file")
    assert catalogs.price_of(["mi300x", "mi300x"]).tolist() == [3.20, 3.20]


def test_old_and_single_provider_prices_are_flagged():
    chosen = _chosen(max_age_days=180)
    assert chosen.loc["reserved_1y", "warning"] == ("price is 358 days old (as of 2025-11-30); "
                                                   "only one provider lists it")
    assert chosen.loc["on_demand", "warning"] == ""
    assert _chosen(max_age_days=400).loc["reserved_1y", "warning"] == "only one provider lists it"
    lines = warning_lines(choose_prices(PRICES, ["h100-sxm"], rule=PriceRule(), today=TODAY))
    assert lines == ["h100-sxm reserved_1y $5.42/GPU-hour from aws us-east-1: price is 358 days old "
                     "(as of 2025-11-30); only one provider lists it"]


def test_no_rows_gives_an_empty_table():
    assert choose_prices(PRICES, ["l4"], rule=PriceRule(), today=TODAY).empty


@pytest.mark.parametrize(("text", "match"), [
    ("cheap", "unknown price rule 'cheap'; did you mean 'cheapest'"),
    ("provider:", "unknown price rule 'provider:'"),
])
def test_bad_rules(text, match):
    with pytest.raises(InvalidValueError, match=match):
        parse_price_rule(text)


def test_bad_age():
    with pytest.raises(InvalidValueError, match="max price age must be a whole number of days >= 0, got -1"):
        PriceRule(max_age_days=-1)


@given(st.lists(st.floats(0.1, 50.0), min_size=1, max_size=9))
def test_cheapest_never_above_median_and_both_are_listed(values):
    prices = _rows(*[("h100-sxm", f"p{i}", "any", "on_demand", v, "2026-11-01") for i, v in enumerate(values)])
    cheapest = _chosen(prices).loc["on_demand", "usd_per_gpu_hour"]
    median = _chosen(prices, choice="median").loc["on_demand", "usd_per_gpu_hour"]
    assert cheapest == min(values) <= median <= max(values)
    assert median in values
