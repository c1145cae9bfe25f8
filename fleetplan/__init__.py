"""fleetplan: how many of which GPUs an LLM service needs, and what it costs.

Importing fleetplan sets pandas' ``mode.string_storage`` to ``"python"``, so every text column
the package makes (catalogs, sweep grids, MILP tables, plans) keeps its strings in a NumPy
object array rather than an Arrow one. The values, the ``str`` dtype and every result are the
same; a plan is thousands of operations on frames of a few rows to a few thousand, and on
Arrow-backed strings a tiny plan, nearly all such operations, takes about 1.5 times as long
(``benchmarks/bench_small_plans.py`` measures both). One storage for the whole process also
keeps merge keys of one dtype: a key column stored one way merged with one stored the other
becomes ``object``.

``FLEETPLAN_STRING_STORAGE=pyarrow`` in the environment keeps pandas' Arrow storage instead,
for every frame, the package's own constants included, since they are made on import.
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import PackageNotFoundError, version

import pandas as pd

#: Values ``FLEETPLAN_STRING_STORAGE`` may take: pandas' storages of its ``str`` dtype.
STRING_STORAGES = ("python", "pyarrow")


def chosen_string_storage(environ=os.environ) -> str:
    """The string storage ``FLEETPLAN_STRING_STORAGE`` names, ``python`` when it is unset; an
    unknown name is logged and ``python`` kept, since an import cannot answer with exit code 2."""
    storage = environ.get("FLEETPLAN_STRING_STORAGE", "python").strip().lower() or "python"
    if storage not in STRING_STORAGES:
        logging.getLogger(__name__).warning(
            "FLEETPLAN_STRING_STORAGE=%r is not one of %s; using python", storage,
            ", ".join(STRING_STORAGES))
        return "python"
    return storage


STRING_STORAGE = chosen_string_storage()
pd.set_option("mode.string_storage", STRING_STORAGE)

try:
    __version__ = version("fleetplan")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = ["STRING_STORAGE", "STRING_STORAGES", "__version__", "chosen_string_storage"]
