"""Shared fixtures, and Hypothesis settings that make every run the same.

Property tests are derandomized (the examples come from a fixed seed per test) and keep no
example database, so a run never depends on the machine's history; every counterexample ever
found is pinned as an ``@example`` on its test. ``HYPOTHESIS_PROFILE=explore`` draws fresh
random examples instead, to look for new counterexamples.
"""

import os

import pytest
from hypothesis import settings

from fleetplan.catalogs import load_catalogs

settings.register_profile("deterministic", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile("explore", derandomize=False, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


@pytest.fixture(scope="session")
def shipped():
    """The shipped catalogs."""
    return load_catalogs()
