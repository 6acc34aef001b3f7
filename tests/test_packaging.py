"""The conda environment and pyproject.toml must install the same thing."""

from __future__ import annotations

from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = set(project["dependencies"]) | set(project["optional-dependencies"]["test"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert set(pip_section) - {"-e ."} == wanted
    assert "-e ." in pip_section
    python = next(d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python="))
    assert project["requires-python"] == ">=3.10" and python.split("=")[1] >= "3.10"


def test_ci_runs_the_readme_test_command():
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    assert "make test" in (ROOT / "README.md").read_text() and "make book" in (ROOT / "README.md").read_text()


def test_the_readme_says_whether_gpu_results_are_stored():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stored = any((ROOT / "results").glob("*/cuda-*.csv"))
    assert ("**No GPU results are stored yet**" in readme) != stored, "README.md's GPU sentence is stale"
