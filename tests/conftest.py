import pytest


@pytest.fixture(scope="session")
def shipped():
    """The shipped catalogs."""
    from fleetplan.catalogs import load_catalogs

    return load_catalogs()
