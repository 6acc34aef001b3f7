"""The package as a reader installs it into a notebook of their own (issue 38): the wheel with its `keras` extra and a
CPU torch in a fresh venv, with no TensorFlow, Jupyter Book or papermill, explains a saved model, watches a model,
and answers a command that needs what it lacks in one line."""

from __future__ import annotations

import json
import re
import shlex
import shutil
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
def reader(tmp_path_factory) -> Path:
    """A fresh venv with the wheel's `keras` extra and this machine's CPU torch: its bin/ folder."""
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


def _dry_pip(reader: Path, arguments: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The reader's `pip ARGUMENTS` as pip resolves it, installing nothing (--dry-run) and fetching nothing
    (--no-index): lstmstudy is in that venv already, and h5py came with its keras extra."""
    command, *rest = arguments
    return run(reader / "python", "-m", "pip", command, "--dry-run", "--no-index", "--no-deps", *rest, cwd=cwd)


def _ipython_magics(source: str, cwd: Path) -> list[str]:
    """The line magics a notebook cell runs where lstmstudy cannot be imported (a hosted notebook's), each expanded as
    IPython expands `{expression}` in a magic's line; the cell's code runs in `cwd`."""
    import builtins
    import os

    from IPython.core.inputtransformer2 import TransformerManager

    magics: list[str] = []

    class Shell:
        def run_line_magic(self, name: str, line: str, _stack_depth: int = 1) -> None:
            magics.append(f"{name} {line.format_map(namespace)}")

    def refusing(name, *args, **kwargs):
        if name.split(".")[0] == "lstmstudy":
            raise ImportError(f"No module named {name!r}")
        return builtins.__import__(name, *args, **kwargs)

    namespace = {"__builtins__": {**vars(builtins), "__import__": refusing}, "get_ipython": Shell}
    before = os.getcwd()
    os.chdir(cwd)
    try:
        exec(TransformerManager().transform_cell(source), namespace)
    finally:
        os.chdir(before)
    return magics


def test_the_install_lines_work_as_printed(reader, tmp_path):
    """The shell lines of the README and of "Add your GPU" that install the wheel, the hosted notebook's lines and each
    claim notebook's first cell, run as printed with the wheel built here where each says to put it."""
    import nbformat

    wheel = next((reader.parents[1] / "dist").glob("lstmstudy-*.whl"))
    for folder in ("dist", "tools", "."):
        (tmp_path / folder).mkdir(exist_ok=True)
        shutil.copy(wheel, tmp_path / folder)
    shell_lines = [line.strip().split("  #")[0] for name in ("README.md", "book/add_your_gpu.md")
                   for line in (ROOT / name).read_text().splitlines()
                   if line.strip().startswith("pip install") and "lstmstudy-" in line]
    assert len(shell_lines) == 3, shell_lines
    for line in shell_lines:
        script = f'pip() {{ "{reader}/python" -m pip "$1" --dry-run --no-index --no-deps "${{@:2}}"; }}\n{line}'
        done = run("bash", "-c", script, cwd=tmp_path)
        assert done.returncode == 0, (line, done.stderr[-2000:])
    hosted = re.search(r"```text\n(import glob.*\n%pip install .*)\n", (ROOT / "book/add_your_gpu.md").read_text())[1]
    cells = [hosted, *(nbformat.read(path, as_version=4).cells[1].source
                       for path in sorted((ROOT / "notebooks").glob("0*.ipynb")))]
    for cell in cells:
        (pip,) = _ipython_magics(cell, tmp_path)
        assert pip.startswith("pip install") and str(wheel.name) in pip, pip
        done = _dry_pip(reader, shlex.split(pip)[1:], tmp_path)
        assert done.returncode == 0, (pip, done.stderr[-2000:])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ImportError, match="no lstmstudy-\\*.whl is beside this page"):
        _ipython_magics(cells[1], empty)
