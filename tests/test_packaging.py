"""What the package declares: a light core, one extra per house, every module it imports declared where it is
needed; and `make install` and environment.yml install the same thing."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
import yaml

from lstmstudy.backends import KERAS_TESTED, keras_private
from lstmstudy.errors import DISTRIBUTIONS, StudyError

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: the core: what reads the stored sets, the ledger and a saved model's config
CORE = {"numpy", "pandas", "filelock", "tqdm", "pyyaml"}
#: what `make install` and environment.yml install: everything the study runs on, and its tests
INSTALLED = ".[study,test]"


def name(requirement: str) -> str:
    """A requirement's distribution, normalised (PEP 503)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group()).lower()


def declared() -> dict[str, list[str]]:
    """Each declared distribution and where: 'core' or the extras that list it."""
    where = defaultdict(list)
    for requirement in PROJECT["dependencies"]:
        where[name(requirement)].append("core")
    for extra, requirements in PROJECT["optional-dependencies"].items():
        for requirement in requirements:
            where[name(requirement)].append(extra)
    return where


def imported_modules() -> dict[str, set[str]]:
    """Every third-party top-level module the package imports (at the top or inside a function), with its files."""
    found = defaultdict(set)
    for path in sorted((ROOT / "lstmstudy").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                modules = [node.module]
            else:
                continue
            for module in {m.split(".")[0] for m in modules} - set(sys.stdlib_module_names) - {"lstmstudy"}:
                found[module].add(str(path.relative_to(ROOT)))
    return found


def test_every_module_the_package_imports_is_declared():
    where = declared()
    missing = {module: sorted(files) for module, files in imported_modules().items()
               if name(DISTRIBUTIONS.get(module, module)) not in where}
    assert not missing, f"imported, declared nowhere in pyproject.toml (or named in errors.DISTRIBUTIONS): {missing}"


def test_the_core_is_light_and_reads_the_stored_results_and_the_ledger_alone():
    assert {name(r) for r in PROJECT["dependencies"]} == CORE
    assert not any("==" in r for r in PROJECT["dependencies"] + PROJECT["optional-dependencies"]["tensorflow"])
    beyond = sorted(set(imported_modules()) - {m for m in imported_modules()
                                                if name(DISTRIBUTIONS.get(m, m)) in CORE})
    code = (f"import sys\nsys.modules.update(dict.fromkeys({beyond!r}))  # as if not installed\n"
            "from lstmstudy import cli, ledger, results\nassert len(ledger.table()) > 0")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_make_install_and_environment_yml_install_everything_the_study_runs_on():
    extras = PROJECT["optional-dependencies"]
    study = next(r for r in extras["study"] if r.startswith("lstmstudy["))
    assert set(study[len("lstmstudy["):-1].split(",")) == set(extras) - {"study", "test"}
    assert "tensorflow==2.21.*" in extras["study"]  # the release the pages were measured with
    assert f"-e '{INSTALLED}'" in (ROOT / "Makefile").read_text()
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert pip_section == [f"-e {INSTALLED}"]
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert PROJECT["requires-python"] == ">=3.10" and python.split("=")[1] >= "3.10"


def test_keras_private_modules_are_read_in_the_tested_range_only():
    assert f"keras{KERAS_TESTED}" in PROJECT["optional-dependencies"]["keras"]
    low, high = (tuple(map(int, bound.split("."))) for bound in re.fullmatch(r">=([\d.]+),<([\d.]+)",
                                                                              KERAS_TESTED).groups())
    assert low <= tuple(int(part) for part in metadata.version("keras").split(".")[:2]) < high
    assert callable(keras_private("keras.src.backend", "in_symbolic_scope"))
    with pytest.raises(StudyError, match=rf"keras\.src\.gone\.x is not in this Keras .* keras{KERAS_TESTED}$"):
        keras_private("keras.src.gone", "x")


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert "make test" in (ROOT / "README.md").read_text() and "make book" in (ROOT / "README.md").read_text()


def test_the_readme_says_whether_gpu_results_are_stored():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stored = any((ROOT / "results").glob("*/cuda-*.csv"))
    assert ("**No GPU results are stored yet**" in readme) != stored, "README.md's GPU sentence is stale"
