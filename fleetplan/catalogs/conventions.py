"""Conventions every area shares: pricing types, commitment terms and the hours in a month.

One home for each, so a new pricing type or a different month length is a change here, not a
search through the code base.
"""

from __future__ import annotations

#: Every pricing type a price row may have, in the order outputs list them.
PRICING_TYPES: tuple[str, ...] = ("on_demand", "spot", "reserved_1y", "reserved_3y")

#: Pricing types paid per hour used, bought and released at will.
FLEXIBLE_PRICING: tuple[str, ...] = ("on_demand", "spot")

#: Pricing types that commit to every hour of a term, used or not.
RESERVED_PRICING: tuple[str, ...] = ("reserved_1y", "reserved_3y")

#: Pricing types of GPUs in the company's own data halls, which draw on a site's power envelope:
#: servers already owned, and servers the plan buys.
ON_PREMISES_PRICING: tuple[str, ...] = ("owned", "purchase")

#: Pricing types of GPUs the company already has when it plans: reserved commitments made
#: before the plan (sunk until their end) and servers it owns (power and hosting only).
EXISTING_PRICING: tuple[str, ...] = ("committed", "owned")

#: Pricing types decided once for the whole horizon from their start month: reserved terms and
#: servers the plan buys.
LINKING_PRICING: tuple[str, ...] = (*RESERVED_PRICING, "purchase")

#: Length of each reserved commitment [months].
RESERVED_TERM_MONTHS: dict[str, int] = {"reserved_1y": 12, "reserved_3y": 36}

#: Hours in an average month: 8,760 hours a year / 12 [h].
HOURS_PER_MONTH: float = 730.0

#: Seconds in an hour [s].
SECONDS_PER_HOUR: float = 3600.0

#: Separates an engine id from the release its efficiency rows describe (``tensorrt-llm@0.14``).
#: An id without one means the engine's newest measured release.
RELEASE_MARK: str = "@"


def engine_base(engine_id: str) -> str:
    """The engine an engine id names, without its release.

    >>> engine_base("tensorrt-llm@0.14"), engine_base("vllm")
    ('tensorrt-llm', 'vllm')
    """
    return str(engine_id).split(RELEASE_MARK, 1)[0]
