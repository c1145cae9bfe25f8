"""Atomic file and folder writes: a failed export leaves no partial output behind.

Every writer produces its output under a temporary name in the destination folder (same file
system, so the final ``os.replace`` is atomic) and moves it into place only once complete. If
the writer raises (or the process is interrupted by a signal the command line turns into an
exception), the temporary output is deleted and an existing file at the destination is left
exactly as it was. Temporaries carry the writing process's id: the next run removes those of
processes that are gone (a SIGKILL leaves them), never another live run's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from fleetplan.errors import InvalidValueError, NotWritableError

log = logging.getLogger(__name__)

#: File every folder output holds, so a later run knows it may replace the folder. Readers skip
#: it: pyarrow datasets and DuckDB/Polars globs ignore dot files and non-Parquet names.
OUTPUT_MARKER = ".fleetplan-output"


def _check_folder(path: Path) -> Path:
    """The folder ``path`` goes in; it must exist (a typo should not create folders)."""
    folder = path.parent if str(path.parent) else Path(".")
    if folder.is_dir():
        return folder
    existing = next((p for p in folder.parents if p.exists()), None) if not folder.exists() else folder
    if existing is not None and not existing.is_dir():
        message = f"output path '{path}': '{existing}' is a file, not a folder"
        raise InvalidValueError(message)
    message = f"output folder '{folder}' does not exist (writing '{path}'); create it first"
    raise InvalidValueError(message)


def output_path(path: str | os.PathLike) -> Path:
    """The destination of a file output as a ``Path``: its folder exists, it is not a folder."""
    path = Path(path)
    _check_folder(path)
    if path.is_dir():
        message = f"output path '{path}' is a folder; give a file name inside it"
        raise InvalidValueError(message)
    return path


def check_output_path(path: str | os.PathLike) -> Path:
    """Check before any long work that ``path`` can be written; remove stale temporaries.

    Refused: a missing folder, a path under a file, and an existing folder fleetplan did not
    write (input errors); a folder that cannot be written to (:class:`NotWritableError`).
    """
    path = Path(path)
    folder = _check_folder(path)
    if path.is_dir() and not (path / OUTPUT_MARKER).is_file():
        message = (f"output folder '{path}' already exists and is not a fleetplan output; "
                   "remove it or name a new file")
        raise InvalidValueError(message)
    try:
        handle, probe = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp")
    except OSError as problem:
        message = f"cannot write to '{folder}': {problem.strerror or problem}"
        raise NotWritableError(message) from None
    os.close(handle)
    os.unlink(probe)
    remove_stale_temporaries(path)
    return path


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Remove ``.<name>.*.tmp`` / ``.old`` entries next to ``path`` that no live process owns."""
    folder = path.parent if str(path.parent) else Path(".")
    pattern = re.compile(re.escape(f".{path.name}.") + r"(?:(\d+)-)?[^/]*\.(?:tmp|old)$")
    removed = []
    for entry in folder.glob(f".{glob_escape(path.name)}.*"):
        match = pattern.fullmatch(entry.name)
        if match is None or _alive(match.group(1)):
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry)
    if removed:
        log.info("removed %d temporaries an interrupted run left next to %s", len(removed), path)
    return removed


def glob_escape(name: str) -> str:
    """``name`` with glob wildcards taken literally."""
    return re.sub(r"([*?\[])", r"[\1]", name)


def _alive(pid_text: str | None) -> bool:
    if pid_text is None:
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def _default_mode(directory: bool) -> int:
    """Permissions a plain ``open``/``mkdir`` would give (mkstemp's are owner-only)."""
    mask = os.umask(0)
    os.umask(mask)
    return (0o777 if directory else 0o666) & ~mask


def _temporary_name(path: Path, kind: str) -> Path:
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}-", suffix=f".{kind}")
    os.close(handle)
    mode = path.stat().st_mode & 0o777 if path.is_file() else _default_mode(directory=False)
    os.chmod(name, mode)
    return Path(name)


def _fsync(path: Path) -> None:
    with open(path, "rb") as stream:
        os.fsync(stream.fileno())


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary file path next to ``path``; on success move it onto ``path``.

    The caller writes the whole output to the yielded path (by name: pyarrow, zipfile and
    openpyxl all accept one). On any exception the temporary file is removed and re-raised.
    """
    final = output_path(path)
    remove_stale_temporaries(final)
    temporary = _temporary_name(final, "tmp")
    try:
        yield temporary
        _fsync(temporary)
        os.replace(temporary, final)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    log.debug("wrote %s", final)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb", **kwargs) -> Iterator[IO]:
    """Open a temporary file next to ``path`` for writing; it replaces ``path`` on success."""
    with atomic_path(path) as temporary, open(temporary, mode, **kwargs) as stream:
        yield stream


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns the path."""
    with atomic_open(path, "w", encoding="utf-8", newline="") as stream:
        stream.write(text)
    return Path(path)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder next to ``path``; on success it takes ``path``'s place.

    An existing folder at ``path`` is replaced only when it is empty or an earlier fleetplan
    output (it holds the :data:`OUTPUT_MARKER` file every folder output gets): it is moved aside,
    replaced, then deleted, so readers see either the old complete output or the new one. Any
    other existing folder, and an existing *file*, are refused: a mistyped ``-o`` must never
    delete someone's data.
    """
    final = Path(path)
    if not (final.parent if str(final.parent) else Path(".")).is_dir():
        message = f"output folder '{final.parent}' does not exist (writing '{final}')"
        raise InvalidValueError(message)
    if final.exists() and not final.is_dir():
        message = f"output path '{final}' is a file; a folder is written there, remove it first"
        raise InvalidValueError(message)
    if final.is_dir() and any(final.iterdir()) and not (final / OUTPUT_MARKER).is_file():
        message = (f"output folder '{final}' already exists and is not a fleetplan output; "
                   "remove it or name a new folder")
        raise InvalidValueError(message)
    remove_stale_temporaries(final)
    temporary = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.{os.getpid()}-", suffix=".tmp"))
    os.chmod(temporary, _default_mode(directory=True))
    try:
        yield temporary
        (temporary / OUTPUT_MARKER).write_text("written by fleetplan; the folder may be replaced by the next run\n")
        _swap_in(temporary, final)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    log.debug("wrote folder %s", final)


def _swap_in(new: Path, final: Path) -> None:
    if not final.exists():
        os.replace(new, final)
        return
    old = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.{os.getpid()}-", suffix=".old"))
    os.replace(final, old / "previous")
    try:
        os.replace(new, final)
    except BaseException:
        os.replace(old / "previous", final)
        raise
    finally:
        shutil.rmtree(old, ignore_errors=True)
