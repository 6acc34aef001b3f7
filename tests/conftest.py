"""Shared test set-up: GPU tests skip with a visible reason where there is no GPU; the book is built
once per session for the tests that read it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    reason = pytest.mark.skip(reason="needs a CUDA GPU; none is visible to torch on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(reason)


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
def built_book(tmp_path_factory) -> BuiltBook:
    """The book built once per test session from the committed pages, shared by test_book and test_browser."""
    out = tmp_path_factory.mktemp("book")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "lstmstudy.cli", "book", "--path-output", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    return BuiltBook(done.returncode, done.stdout + done.stderr, out / "_build" / "html", time.perf_counter() - start)


#: what `lstmstudy measure` must never import: a GPU node has none of them
NOT_ON_A_GPU_NODE = ("papermill", "nbformat", "IPython", "myst_nb", "jupyter_book", "tensorflow")
BLOCKER = """
import sys

# None in sys.modules: `import x` fails and importlib.util.find_spec("x") is None, as if x were not installed
sys.modules.update(dict.fromkeys({blocked!r}))
"""


@dataclass(frozen=True)
class QuickMeasurement:
    """One `lstmstudy measure --claims all --quick` on this CPU, as on a GPU node: the imports such a node
    lacks are blocked and KERAS_BACKEND is unset, so Keras must fall back to its torch backend."""

    done: subprocess.CompletedProcess
    root: Path
    seconds: float


@pytest.fixture(scope="session")
def quick_measurement(tmp_path_factory) -> QuickMeasurement:
    site = tmp_path_factory.mktemp("site")
    (site / "sitecustomize.py").write_text(BLOCKER.format(blocked=set(NOT_ON_A_GPU_NODE)))
    root = tmp_path_factory.mktemp("measured") / "results"
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "LSTMSTUDY_KERAS_BACKEND_CHOSEN")}
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "lstmstudy.cli", "measure", "--device", "cpu", "--claims", "all",
                           "--quick", "--results-dir", str(root), "--no-progress"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    return QuickMeasurement(done, root, time.perf_counter() - start)
