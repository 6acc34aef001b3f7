"""`lstmstudy explain` as a CI step and a pre-commit hook: the hook file names a command that exists, and the light
core answers on a .keras file with torch, TensorFlow, Keras and h5py all unimportable."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from conftest import import_blocker

from lstmstudy.cli import parser

ROOT = Path(__file__).resolve().parents[1]
#: run `lstmstudy explain` in a process where the frameworks (and h5py, which only .h5 files need) cannot be imported
BLOCKED = import_blocker(missing=("torch", "tensorflow", "keras", "jax", "h5py")) + """
from lstmstudy.cli import main
sys.exit(main(["explain", *sys.argv[1:]]))
"""


def hook() -> dict:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert isinstance(hooks, list) and [h["id"] for h in hooks] == ["lstmstudy-explain"]
    return hooks[0]


def test_the_hook_names_a_command_that_exists_and_the_files_it_reads():
    found = hook()
    assert found["language"] == "python" and {"name", "entry", "files"} <= set(found)
    script, command = found["entry"].split()
    assert script in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    parser().parse_args([command, "model.keras"])  # exits on a command it does not know
    files = re.compile(found["files"])
    assert all(files.search(name) for name in ("model.keras", "models/old.h5"))
    assert not any(files.search(name) for name in ("model.keras.bak", "notes_h5.txt", "keras.py"))


def test_the_readme_shows_the_hook_and_the_ci_step():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Check your models in CI"):]
    section = section[:section.index("\n## ", 1)]
    assert f"- id: {hook()['id']}" in section and "lstmstudy explain models/" in section


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[Path, Path]:
    keras = pytest.importorskip("keras")
    folder = tmp_path_factory.mktemp("ci")
    fine = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4)])
    relu = keras.Sequential([keras.Input((5, 3)), keras.layers.GRU(4, activation="relu")])
    fine.save(folder / "fine.keras")
    relu.save(folder / "relu.keras")
    return folder / "fine.keras", folder / "relu.keras"


def test_the_light_core_explains_keras_files_with_no_framework_importable(models, tmp_path):
    def explain(*paths: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", BLOCKED, *map(str, paths)], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)

    fine, relu = models
    done = explain(fine)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cuDNN's fused kernel on a GPU" in done.stdout
    done = explain(fine, relu)  # as pre-commit calls it, with the staged files
    assert done.returncode == 1, done.stderr[-2000:]
    assert "fix: use activation='tanh'" in done.stdout and "Traceback" not in done.stderr
