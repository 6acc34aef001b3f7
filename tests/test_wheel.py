"""The package as a reader installs it into a notebook of their own (issue 38): the wheel with its `keras` extra and a
CPU torch in a fresh venv, with no TensorFlow, Jupyter Book or papermill, explains a saved model, watches a model,
and answers a command that needs what it lacks in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lstmstudy import __version__

ROOT = Path(__file__).resolve().parent.parent
#: what the wheel is built from, copied so that the build writes nothing into the checkout
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "lstmstudy")

pytestmark = [
    pytest.mark.wheel,
    # pinned with its local label (2.13.0+cpu), torch comes from this machine's wheels only: never a CUDA build
    pytest.mark.skipif("+cpu" not in torch.__version__, reason="needs this machine's CPU build of torch to install"),
]

#: a reader's notebook: Keras on torch (no TensorFlow here), a model saved and watched
READER = """
import importlib.util, json, os, sys, warnings
os.environ["KERAS_BACKEND"] = "torch"
absent = [name for name in ("tensorflow", "jupyter_book", "papermill", "nbformat") if importlib.util.find_spec(name)]
assert not absent, absent
import keras, numpy as np
from lstmstudy.watch import FallbackWarning, watching

model = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4, activation="relu"), keras.layers.Dense(1)])
model.save(sys.argv[1])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    with watching(model):
        model.predict(np.ones((2, 5, 3), "float32"), verbose=0)
print(json.dumps([str(w.message) for w in caught if isinstance(w.message, FallbackWarning)]))
"""


def run(*command: str | Path, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def reader(request, tmp_path_factory) -> Path:
    """A fresh venv with the wheel's `keras` extra and this machine's CPU torch: its bin/ folder, made once per test
    run (pip installs for tens of seconds) and kept in the run's temporary folder for every worker."""
    from conftest import once_per_run

    return once_per_run(request.config, tmp_path_factory, "wheel_reader", lambda: _reader(tmp_path_factory))


def _reader(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for name in SOURCES:
        done = run("cp", "-r", ROOT / name, source / name, cwd=tmp)
        assert done.returncode == 0, done.stderr
    done = run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", tmp / "dist",
               source, cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    wheel = next((tmp / "dist").glob(f"lstmstudy-{__version__}-*.whl"))
    done = run(sys.executable, "-m", "venv", tmp / "venv", cwd=tmp)
    assert done.returncode == 0, done.stderr
    bin_ = tmp / "venv" / "bin"
    done = run(bin_ / "python", "-m", "pip", "install", "--quiet", "--no-compile", f"torch=={torch.__version__}",
               f"{wheel}[keras]", cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    return bin_


def test_a_reader_without_tensorflow_explains_and_watches_a_model(reader, tmp_path):
    model = tmp_path / "model.keras"
    done = run(reader / "python", "-c", READER, model, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    warned = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(warned) == 1 and "activation='tanh'" in warned[0]
    explained = run(reader / "lstmstudy", "explain", model, cwd=tmp_path)
    assert explained.returncode == 1, explained.stderr[-3000:]  # a layer falls back
    assert "on a GPU this layer would not use cuDNN" in explained.stdout and "activation='tanh'" in explained.stdout
    assert not (tmp_path / "results").exists()  # it reads the stored costs, writes none


def test_commands_that_need_the_study_or_its_book_say_so_in_one_line(reader, tmp_path):
    assert run(reader / "lstmstudy", "--version", cwd=tmp_path).stdout == f"lstmstudy {__version__}\n"
    done = run(reader / "lstmstudy", "reproduce", "--no-measure", cwd=tmp_path)
    assert done.returncode == 2 and done.stderr == (f"lstmstudy: error: no claim notebooks in {tmp_path / 'notebooks'}"
                                                    f": run this in a checkout of the study, or name one with --root "
                                                    f"or $LSTMSTUDY_ROOT\n")
    (tmp_path / "notebooks").mkdir()
    import nbformat  # here, not at the top: the GPU node collects the suite without the notebook stack

    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "notebooks" / "01_demo.ipynb")
    done = run(reader / "python", "-m", "lstmstudy", "reproduce", "--no-measure", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    wheel = next((reader.parents[1] / "dist").glob("lstmstudy-*.whl"))  # the command names the wheel it came from
    assert done.stderr.splitlines()[-1] == ("lstmstudy: error: this needs papermill, which is not installed here: "
                                            f"pip install '{wheel}[book]'")
