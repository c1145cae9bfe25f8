"""Hourly demand profiles in a scenario file: whole days of non-negative values, at most a leap
year of them, and one repeating cycle that every workload's profile divides."""

from __future__ import annotations

import math

#: Most values of an hourly demand profile: the hours of a leap year.
MAX_PROFILE_HOURS = 8784
#: A profile is a cycle of whole days, so that its hours line up with the clock in every month.
HOURS_PER_DAY = 24

#: JSON Schema of ``workloads[].hourly_profile`` (``fleetplan schema``).
PROFILE_SCHEMA = {
    "anyOf": [{"type": "array", "items": {"type": "number", "minimum": 0},
               "minItems": HOURS_PER_DAY, "maxItems": MAX_PROFILE_HOURS},
              {"type": "string", "description": "CSV file: one value per hour (last column), "
                                                "optionally with a timestamp column"},
              {"type": "null"}],
    "description": "Relative demand per hour of a repeating cycle (24 values for a day, 168 for "
                   "a week; any whole number of days; normalized to mean 1), or a CSV path. "
                   "Every profile's length must divide the longest one.",
}


def check_profile(values: list) -> list[float]:
    """Whole days of finite, non-negative numbers, not all zero (raises ValueError otherwise)."""
    if len(values) % HOURS_PER_DAY or not HOURS_PER_DAY <= len(values) <= MAX_PROFILE_HOURS:
        message = (f"must hold a whole number of days of hourly values ({HOURS_PER_DAY} for a "
                   f"day, 168 for a week, at most {MAX_PROFILE_HOURS}), got {len(values)} values")
        raise ValueError(message)
    numbers = []
    for hour, value in enumerate(values):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not ok or not math.isfinite(value) or value < 0:
            message = f"hour {hour}: must be a finite number >= 0, got {value!r}"
            raise ValueError(message)
        numbers.append(float(value))
    if sum(numbers) <= 0:
        message = "must have at least one value > 0"
        raise ValueError(message)
    return numbers


def check_profile_cycle(workloads: list) -> None:
    """Every hourly profile's length divides the longest one (ValueError otherwise)."""
    lengths = [(i, len(w.hourly_profile)) for i, w in enumerate(workloads)
               if isinstance(w.hourly_profile, list)]
    if not lengths:
        return
    longest, cycle = max(lengths, key=lambda item: item[1])
    for index, length in lengths:
        if cycle % length:
            message = (f"workloads[{index}].hourly_profile: its {length} values do not divide "
                       f"the {cycle}-hour cycle of workloads[{longest}]")
            raise ValueError(message)
