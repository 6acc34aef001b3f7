"""Shared test set-up: GPU tests skip with a visible reason where there is no GPU; the book is built, and the
quick measurement made, once per test run for the tests that read them, however many pytest-xdist workers
(`make test` runs `-n auto`) share the run."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest
import torch
from filelock import FileLock

from lstmstudy import backends, plots

# the suite is one of the study's own processes, as the command line is: quiet native logs, Keras on torch
# without TensorFlow, the book's figure theme (the package itself changes nothing on import)
backends.study_process()
plots.use_theme()

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    reason = pytest.mark.skip(reason="needs a CUDA GPU; none is visible to torch on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(reason)


def once_per_run(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory, name: str,
                 make: Callable[[], T]) -> T:
    """`make()`, computed by the first xdist worker that asks and read back by the others (pytest-xdist's
    recipe: a file lock in the run's shared temporary folder); without workers (or xdist), simply `make()`."""
    if not hasattr(config, "workerinput"):
        return make()
    shared = tmp_path_factory.getbasetemp().parent  # this run's folder, above every worker's own
    with FileLock(shared / f"{name}.lock"):
        stored = shared / f"{name}.pickle"
        if stored.exists():
            return pickle.loads(stored.read_bytes())
        value = make()
        stored.write_bytes(pickle.dumps(value))
        return value


@pytest.fixture
def results_root(tmp_path, monkeypatch):
    """A private results store, so no test writes into the repository's results/."""
    root = tmp_path / "results"
    monkeypatch.setenv("LSTMSTUDY_RESULTS", str(root))
    return root


@dataclass(frozen=True)
class BuiltBook:
    """One `lstmstudy book` build (warnings are errors) into a temporary folder."""

    returncode: int
    log: str
    html: Path
    seconds: float

    def check(self) -> None:
        assert self.returncode == 0, "the book build failed (Sphinx warnings are errors):\n" + self.log[-6000:]


@pytest.fixture(scope="session")
def built_book(request, tmp_path_factory) -> BuiltBook:
    """The book built once per test run from the committed pages, shared by test_book and test_browser."""

    def build() -> BuiltBook:
        out = tmp_path_factory.mktemp("book")
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "lstmstudy.cli", "book", "--path-output", str(out)],
                              cwd=ROOT, capture_output=True, text=True, timeout=900)
        return BuiltBook(done.returncode, done.stdout + done.stderr, out / "_build" / "html",
                         time.perf_counter() - start)

    return once_per_run(request.config, tmp_path_factory, "built_book", build)


@pytest.fixture(scope="session")
def ledger_table(request, tmp_path_factory):
    """`ledger.table()` of the committed results (every verdict of every stored set), computed once per test run."""
    from lstmstudy import ledger

    return once_per_run(request.config, tmp_path_factory, "ledger_table", ledger.table)


#: what `lstmstudy measure` must never import: a GPU node has none of them
NOT_ON_A_GPU_NODE = ("papermill", "nbformat", "IPython", "myst_nb", "jupyter_book", "tensorflow")
_IMPORT_BLOCKER = """
import importlib.abc, importlib.machinery, sys

# None in sys.modules: `import x` fails and importlib.util.find_spec("x") is None, as if x were not installed
sys.modules.update(dict.fromkeys({missing!r}))


class _Refuse(importlib.abc.Loader):
    def create_module(self, spec):
        raise ModuleNotFoundError(f"No module named {{spec.name!r}} (blocked in this test)", name=spec.name)

    def exec_module(self, module):
        pass


class _Refused(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        refused = name.split(".")[0] in {refused!r}
        return importlib.machinery.ModuleSpec(name, _Refuse()) if refused else None


sys.meta_path.insert(0, _Refused())
"""


def import_blocker(*, missing: tuple[str, ...] = (), refused: tuple[str, ...] = ()) -> str:
    """Python source to run first in a child process (`-c`, or as its sitecustomize.py), the one blocker of every
    child that needs one: the `missing` packages look not installed (`import` fails, `find_spec` finds nothing);
    the `refused` ones are found but fail at import, as a broken install does, which a probe that only looks
    (Keras's `Bidirectional` asks `find_spec` for TensorFlow) takes as present."""
    return _IMPORT_BLOCKER.format(missing=set(missing), refused=set(refused))


def quick_claims() -> list[str]:
    """The claims the quick measurement measures: all of them; under an ISA cap (`make test`'s second pass) only
    those with 16-bit points, the rows the cap changes (a 32-bit row runs the same oneDNN kernels, only slower)."""
    from lstmstudy.backends import isa_cap
    from lstmstudy.claims import registry

    if not isa_cap():
        return [claim.name for claim in registry()]
    return [claim.name for claim in registry() if {p.precision for p in claim.points("cpu", quick=True)} - {"fp32"}]


@dataclass(frozen=True)
class QuickMeasurement:
    """One `lstmstudy measure --claims ... --quick` of `quick_claims()` on this CPU, as on a GPU node: the imports
    such a node lacks are blocked and KERAS_BACKEND is unset, so Keras must fall back to its torch backend."""

    done: subprocess.CompletedProcess
    root: Path
    seconds: float
    claims: tuple[str, ...]


@pytest.fixture(scope="session")
def quick_measurement(request, tmp_path_factory) -> QuickMeasurement:

    def measure() -> QuickMeasurement:
        site = tmp_path_factory.mktemp("site")
        (site / "sitecustomize.py").write_text(import_blocker(missing=NOT_ON_A_GPU_NODE))
        root = tmp_path_factory.mktemp("measured") / "results"
        env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "LSTMSTUDY_KERAS_BACKEND_CHOSEN")}
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        start, claims = time.perf_counter(), quick_claims()
        done = subprocess.run([sys.executable, "-m", "lstmstudy.cli", "measure", "--device", "cpu", "--claims", *claims,
                               "--quick", "--results-dir", str(root), "--no-progress"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        return QuickMeasurement(done, root, time.perf_counter() - start, tuple(claims))

    return once_per_run(request.config, tmp_path_factory, "quick_measurement", measure)
