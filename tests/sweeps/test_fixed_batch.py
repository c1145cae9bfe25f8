"""The decode batch a rate sustains: the least fixed point of B -> min(load * step(B), limit)."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fleetplan.sweeps.queueing import least_fixed_batch


def plain_passes(step_ms, load, limit, passes):
    """The textbook iteration from B = 0 (climbs to the least fixed point from below)."""
    batch = np.zeros(np.broadcast_shapes(np.shape(load), np.shape(limit)))
    for _ in range(passes):
        batch = np.minimum(load * step_ms(batch), limit)
    return batch


def roofline(b):
    """A 10 ms memory-bound step growing 0.5 ms per sequence, compute-bound at 0.9 ms each."""
    b = np.maximum(b, 1.0)
    return np.maximum(10.0 + 0.5 * b, 0.9 * b)


def experts(b):
    """A MoE step: the experts touched (2 of 8 per token) grow concavely with the batch."""
    b = np.maximum(b, 1.0)
    return 8.0 + 4.0 * (1.0 - 0.75 ** b) + 0.3 * b


@pytest.mark.parametrize("step_ms", [roofline, experts], ids=["roofline", "experts"])
def test_the_batch_is_the_converged_plain_iteration(step_ms):
    load = np.array([0.0, 0.01, 0.05, 0.09, 0.099, 0.5, 1.05, 1.2, 3.0, np.inf])
    assert least_fixed_batch(step_ms, load, 200.0) == pytest.approx(
        plain_passes(step_ms, load, 200.0, 100_000), rel=1e-12, abs=1e-12)


def test_known_values():
    # B = 0.1 (10 + 0.5 B) -> B = 1 / 0.95; at load 1.2 the compute-bound slope 1.08 > 1 leaves
    # no fixed point below the limit (the replica is unstable).
    assert least_fixed_batch(roofline, np.array([0.1, 1.0, 1.2]), 200.0) == pytest.approx(
        [1.0 / 0.95, 20.0, 200.0], rel=1e-12)


def test_near_capacity_it_converges_where_sixty_plain_passes_stop_short():
    # The step's slope times the load is 0.995: plain passes close 0.5% of the distance each.
    load = 0.995 / 0.5
    exact = load * 10.0 / (1.0 - 0.995)
    assert least_fixed_batch(lambda b: 10.0 + 0.5 * b, load, 1e9) == pytest.approx(exact, rel=1e-12)
    assert plain_passes(lambda b: 10.0 + 0.5 * b, load, 1e9, 60) < 0.3 * exact


def test_of_two_fixed_points_the_least_is_found():
    # B = max(10 + 0.1 B, 2 B - 50) holds at 100/9 and at 50: an empty replica fills to 100/9.
    def step_ms(b):
        return np.maximum(10.0 + 0.1 * b, 2.0 * b - 50.0)
    assert least_fixed_batch(step_ms, 1.0, 1e6) == pytest.approx(100.0 / 9.0, rel=1e-12)


def test_rows_without_a_configuration_stay_nan_and_do_not_hold_up_the_others():
    batch = least_fixed_batch(roofline, np.array([np.nan, 0.1]), np.array([200.0, np.nan]))
    assert np.isnan(batch).all()
    batch = least_fixed_batch(roofline, np.array([np.nan, 0.1]), 200.0)
    assert np.isnan(batch[0]) and batch[1] == pytest.approx(1.0 / 0.95)


@settings(max_examples=60, deadline=None)
@given(base=st.floats(0.5, 50.0), per_seq=st.floats(0.0, 2.0), compute=st.floats(0.0, 3.0),
       saturating=st.floats(0.0, 40.0), load=st.floats(0.0, 5.0), limit=st.floats(1.0, 2048.0))
@example(base=10.0, per_seq=0.5, compute=0.0, saturating=0.0, load=1.99, limit=2048.0)
@example(base=0.5, per_seq=0.0, compute=0.0, saturating=0.0, load=0.0, limit=1.0)  # idle: B = 0
def test_the_batch_is_a_fixed_point_with_none_below_it(base, per_seq, compute, saturating, load, limit):
    def step_ms(b):
        b = np.maximum(b, 1.0)
        return np.maximum(base + per_seq * b + saturating * (1.0 - 0.9 ** b), compute * b)

    batch = float(least_fixed_batch(step_ms, load, limit))
    def gain(b):
        return np.minimum(load * step_ms(b), limit) - b
    assert 0.0 <= batch <= limit
    assert abs(gain(batch)) <= 1e-9 * max(batch, 1.0)
    below = np.linspace(0.0, batch, 2001)[:-1] if batch > 0 else np.zeros(0)
    assert np.all(gain(below) > 0.0)


@settings(max_examples=60, deadline=None)
@given(step=st.sampled_from([roofline, experts]), load=st.floats(0.0, 1.5),
       lower_load=st.floats(0.0, 1.0))
@example(step=roofline, load=1.2, lower_load=1.0)  # unstable: the limit from any start
@example(step=experts, load=0.3, lower_load=1.0)  # a start at the fixed point itself
def test_a_start_from_a_lower_load_finds_the_same_batch(step, load, lower_load):
    # the batch of a lower load lies at or below the least fixed point of a higher one
    start = least_fixed_batch(step, load * lower_load, 200.0)
    assert least_fixed_batch(step, load, 200.0, start) == pytest.approx(
        least_fixed_batch(step, load, 200.0), rel=1e-12, abs=1e-12)
