"""The cuDNN explainer's answers that claim pages 1 and 5 show, stored so that the pages render without torch,
TensorFlow, Keras or pynvml (the rendering house).

The explainer needs the real layers and modules, so the measuring house asks it (`write`, which `lstmstudy explain
--tables` runs; the questions are in `lstmstudy.kernels.criteria_tables`) and stores each table as
`results/explained/<table>.json` of the study's root: its rows and what computed them. Reading one needs pandas only.
The answers depend on the code and the libraries, not on the hardware, so they stay with the code: the pages read
them there whatever result set they render (`$LSTMSTUDY_RESULTS` moves the measurements, not these), and
tests/test_explained.py fails, naming the command, when the stored answers are no longer what the explainer says.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

import pandas as pd

import lstmstudy
from lstmstudy.backends import KERAS_BACKENDS
from lstmstudy.errors import ResultsCorrupt, StudyError
from lstmstudy.hardware import git_state
from lstmstudy.paths import study_root
from lstmstudy.results import atomic_write

#: each table's columns, in the order its page shows them
COLUMNS: dict[str, tuple[str, ...]] = {
    "triggers": ("configuration", "kernel", "fused", "why not the fused kernel"),
    "masks": ("configuration", "framework", "kernel", "fused", "why not the fused kernel"),
}
#: what a file records of what computed its rows
COMPUTED_WITH = ("lstmstudy", "git_commit", "git_dirty", "keras", "keras_backends", "tensorflow", "torch")
#: the command that writes the files
WRITE = "lstmstudy explain --tables"


class Explained(NamedTuple):
    table: pd.DataFrame
    provenance: str  # one line of Markdown: what computed the rows


def path(table: str, root: Path | None = None) -> Path:
    """Where a table is stored: `<root>/explained/<table>.json`; by default `root` is results/ of the study's root
    (`paths.study_root`), beside the code whose answers they are, whatever `$LSTMSTUDY_RESULTS` says."""
    return Path(root or study_root() / "results") / "explained" / f"{table}.json"


def load(table: str, root: Path | None = None) -> Explained:
    """A stored table as its page shows it, and what computed it. A missing or unreadable file is one
    `StudyError` line naming the file and the command that writes it."""
    stored = _read(path(table, root), table)
    return Explained(pd.DataFrame(stored["rows"], columns=list(COLUMNS[table])), provenance(stored["computed_with"]))


def provenance(computed: dict) -> str:
    """One line saying which lstmstudy and which libraries explained a table."""
    commit = f"commit `{computed['git_commit']}`" if computed["git_commit"] else "an unrecorded commit"
    dirty = ", with uncommitted changes" if computed["git_dirty"] else ""
    backends = computed["keras_backends"]
    named = f"{', '.join(backends[:-1])} and {backends[-1]} backends" if len(backends) > 1 else f"{backends[0]} backend"
    tensorflow = f"TensorFlow {computed['tensorflow']}" if computed["tensorflow"] else "no TensorFlow"
    return (f"Explained by lstmstudy {computed['lstmstudy']} ({commit}{dirty}) using Keras {computed['keras']} "
            f"on its {named}, {tensorflow} and PyTorch {computed['torch']}; `{WRITE}` explains them again.")


def store(table: str, frame: pd.DataFrame, computed: dict, root: Path | None = None) -> bool:
    """Store a table and what computed it; True if the file changed. A file holding the same rows from the same
    versions, explained at a clean commit, is kept: that commit gives the same answers, so asking again after a
    commit that changed nothing they depend on rewrites nothing."""
    if tuple(frame.columns) != COLUMNS[table] or set(computed) != set(COMPUTED_WITH):
        raise ValueError(f"the {table} table needs the columns {COLUMNS[table]} and {COMPUTED_WITH}")
    new = {"table": table, "computed_with": {k: computed[k] for k in COMPUTED_WITH},
           "rows": frame.to_dict(orient="records")}
    file = path(table, root)
    try:
        old = _read(file, table)
    except StudyError:
        old = None
    if old and old["computed_with"]["git_dirty"] is False and _answers(old) == _answers(new):
        return False
    file.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(file, json.dumps(new, indent=2, ensure_ascii=False) + "\n")
    return True


def _answers(stored: dict) -> tuple:
    """What a file says, less the commit that computed it."""
    versions = {k: v for k, v in stored["computed_with"].items() if k not in ("git_commit", "git_dirty")}
    return stored["rows"], versions


def _read(file: Path, table: str) -> dict:
    """A stored table's file, checked: its rows have the table's columns and it says what computed them."""
    try:
        stored = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StudyError(f"{file} is missing: `{WRITE}` writes it") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsCorrupt(f"{file}: not JSON ({exc}): `{WRITE}` writes it again") from None
    columns = set(COLUMNS[table])
    rows = stored.get("rows") if isinstance(stored, dict) else None
    computed = stored.get("computed_with") if isinstance(stored, dict) else None
    if not (isinstance(rows, list) and all(isinstance(row, dict) and set(row) == columns for row in rows)
            and isinstance(computed, dict) and set(COMPUTED_WITH) <= set(computed)):
        raise ResultsCorrupt(f"{file}: not a stored {table} table (rows with the columns {list(COLUMNS[table])} and "
                             f"what computed them): `{WRITE}` writes it again")
    return stored


# --- asking the explainer (the measuring house: torch and Keras) ---------------------------------------------

def _triggers() -> tuple[pd.DataFrame, list[str]]:
    """Claim 1's Keras triggers and PyTorch's settings, on a machine with a GPU, on this process's Keras backend."""
    from lstmstudy.backends import keras_backend
    from lstmstudy.claims.cudnn_fallback import TRIGGERS
    from lstmstudy.kernels import criteria_tables

    return criteria_tables.triggers([k for k in TRIGGERS if k.startswith("keras.")], device="cuda"), [keras_backend()]


def _masks() -> tuple[pd.DataFrame, list[str]]:
    """Claim 5's masks and padded or packed batches, on each of Keras's three GPU backends."""
    from lstmstudy.kernels import criteria_tables

    return criteria_tables.masks(), list(KERAS_BACKENDS)


#: each table the pages read: how the explainer answers it now, and the Keras backends it asks
TABLES: dict[str, Callable[[], tuple[pd.DataFrame, list[str]]]] = {"triggers": _triggers, "masks": _masks}


def _version(package: str) -> str:
    """The installed version of `package`, '' where it is not installed (Keras on its torch backend)."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""


def write(tables: Sequence[str] = tuple(TABLES), root: Path | None = None) -> dict[Path, bool]:
    """Ask the explainer `tables` again and store them where the pages read them; each file and whether it
    changed. Nothing is stored when a row could not be explained here (no TensorFlow for its backend, say)."""
    import torch

    from lstmstudy.backends import import_keras

    answered = {name: TABLES[name]() for name in tables}
    for name, (frame, _) in answered.items():
        failed = frame[frame.kernel == "?"]
        if not failed.empty:
            raise StudyError(f"the {name} table could not be explained here, nothing stored: "
                             f"{failed['why not the fused kernel'].iloc[0]}")
    commit, dirty = git_state()
    computed = {"lstmstudy": lstmstudy.__version__, "git_commit": commit, "git_dirty": dirty,
                "keras": import_keras().__version__, "tensorflow": _version("tensorflow"),
                "torch": torch.__version__}
    return {path(name, root): store(name, frame, {**computed, "keras_backends": backends}, root)
            for name, (frame, backends) in answered.items()}
