"""Tensor-parallel groups that span CPU sockets: the ring's boundary hop keeps only
``crossing_efficiency`` of its efficiency, groups inside one domain are untouched, and the fit
identifies the factor from the rows that cross."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fleetplan.sweeps import estimate_cases, operators
from fleetplan.sweeps.fitting import FitSpace, fit, priors_only
from fleetplan.sweeps.measurements import load_measurements, predictable
from fleetplan.sweeps.predictions import MeasurementModel


def _tpot(gpu: str, tp: int, **overrides) -> float:
    case = pd.DataFrame({"gpu": [gpu], "model": ["llama-3.1-70b"], "quant": ["bf16"], "tp": [tp],
                         "input_len": [512], "output_len": [256], "batch": [64], **{k: [v] for k, v in overrides.items()}})
    return float(estimate_cases(case)["tpot_ms"].iloc[0])


@pytest.mark.parametrize(("tp", "domain", "beyond", "expected"), [
    (4, 4, 56.0, False), (8, 4, 56.0, True), (8, 8, np.nan, False), (72, 72, np.nan, False), (4, 2, 128.0, True),
])
def test_spans_domains(tp, domain, beyond, expected):
    assert bool(operators.spans_domains(tp, domain, beyond)) is expected


def test_crossing_slows_only_groups_that_span_sockets():
    # A100 PCIe: four cards per socket, so TP 8 crosses and TP 4 does not.
    assert _tpot("a100-80gb-pcie", 8, crossing_efficiency=0.5) > _tpot("a100-80gb-pcie", 8, crossing_efficiency=1.0)
    assert _tpot("a100-80gb-pcie", 4, crossing_efficiency=0.5) == pytest.approx(
        _tpot("a100-80gb-pcie", 4, crossing_efficiency=1.0), rel=1e-12)
    # An NVLink domain of eight holds the whole group: nothing to cross.
    assert _tpot("h100-sxm", 8, crossing_efficiency=0.5) == pytest.approx(
        _tpot("h100-sxm", 8, crossing_efficiency=1.0), rel=1e-12)


def test_halving_the_crossing_doubles_the_bandwidth_part_of_the_all_reduce():
    case = {"allreduce_latency_us": 0.0}
    full, half, none = (_tpot("a100-80gb-pcie", 8, crossing_efficiency=e, **case) for e in (1.0, 0.5, 1e9))
    # With the latency off, the all-reduce is pure bandwidth time: t(0.5) - t(1) = t(1) - t(inf).
    assert half - full == pytest.approx(full - none, rel=1e-6)


@pytest.mark.slow
def test_fit_recovers_a_known_crossing_efficiency(shipped):
    priors = priors_only(shipped)
    rows = predictable(load_measurements(catalogs=priors))
    rows = rows[(rows["gpu"] == "a100-80gb-pcie") & (rows["regime"] == "offline")].reset_index(drop=True)
    model = MeasurementModel(rows, priors)
    crossing = model.configs["spans_domains"].to_numpy(dtype=bool)
    assert crossing.sum() == (rows["tp"] == 8).sum() > 0
    truth = np.where(crossing, 0.7, 1.0)
    measured = model.predict({"crossing_efficiency": truth})
    fitted = fit(rows.assign(value=measured), priors)
    fields = fitted.space.fields(fitted.theta)
    recovered = fields["crossing_efficiency"]
    # Nine crossing rows against the priors' pull: the factor moves from its prior (0.9) most of
    # the way to the truth, and the crossing rows' worst error shrinks to under half the prior's.
    assert 0.7 < np.median(recovered[crossing]) < 0.85
    assert (recovered[~crossing] == 1.0).all()  # rows inside one socket never carry the factor
    before = np.abs(np.log(model.predict() / measured))[crossing].max()
    after = np.abs(np.log(model.predict(fields) / measured))[crossing].max()
    assert after < before / 2


def test_crossing_parameters_exist_only_where_rows_cross(shipped):
    priors = priors_only(shipped)
    rows = predictable(load_measurements(catalogs=priors))
    inside = rows[(rows["gpu"] == "a100-80gb-pcie") & (rows["tp"] <= 4)].reset_index(drop=True)
    assert not [p for p in FitSpace(MeasurementModel(inside, priors)).parameters if p.group == "crossing"]
    spanning = rows[(rows["gpu"] == "a100-80gb-pcie")].reset_index(drop=True)
    keys = {(p.level, p.key) for p in FitSpace(MeasurementModel(spanning, priors)).parameters if p.group == "crossing"}
    assert keys == {("global", ""), ("gpu", "a100-80gb-pcie")}
