"""Every install line a reader copies (the README, the book's chapters, the notebooks, the pre-commit hook file)
installs lstmstudy from where it is: the checkout, or a wheel built there. lstmstudy is on no package index, and the
repository address the pages once gave does not exist: `pip install lstmstudy` fails, or installs another project's
package of that name. tests/test_wheel.py runs the lines that install the wheel, with a real one."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: what a reader copies from: the rendered claim pages are the notebooks executed, checked through their sources
SOURCES = ["README.md", ".pre-commit-hooks.yaml", *sorted(
    str(path.relative_to(ROOT)) for path in [*(ROOT / "book").glob("*.md"), *(ROOT / "notebooks").glob("*.ipynb")])]
#: how each line names lstmstudy where it installs it: a wheel, the checkout (`.`), a variable holding a wheel's path
FROM_A_PATH = re.compile(r"""(\.whl|\{wheel\}|(^|\s)["']?\.(\[|\s|$)|-e \.|wheelhouse/)""")


def install_lines() -> list[tuple[str, str]]:
    """Each (file, line) that runs pip install, as the file holds it (a notebook's JSON string unescaped)."""
    found = []
    for name in SOURCES:
        text = (ROOT / name).read_text(encoding="utf-8").replace('\\"', '"')
        found += [(name, line.strip()) for line in text.splitlines() if re.search(r"pip3? install", line)]
    return found


def test_the_sources_hold_install_lines():
    files = {name for name, _ in install_lines()}
    assert {"README.md", "book/add_your_gpu.md", "notebooks/01_cudnn_fallback.ipynb"} <= files


@pytest.mark.parametrize(("name", "line"), install_lines())
def test_no_line_installs_lstmstudy_from_an_index_or_a_missing_repository(name, line):
    assert "git+https://github.com/lstmstudy" not in line, (name, line)
    named = re.search(r"""(?:^|[\s"'(])lstmstudy(\[|\s|["']|$)""", line.split("pip install", 1)[-1].split("#")[0])
    if named or "lstmstudy-" in line or "{wheel}" in line or re.search(r"\s\.\[", line):
        assert FROM_A_PATH.search(line) and not named, (name, line)


@pytest.mark.parametrize(("name", "line"), install_lines())
def test_every_extra_a_line_names_is_declared(name, line):
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    for extras in re.findall(r"(?:\.whl|\{wheel\}|\.|\))\[([a-z,]+)\]", line):
        assert set(extras.split(",")) <= declared, (name, line)


def test_the_old_lines_are_caught():
    """The lines the pages held before: each fails the check above."""
    for line in ('pip install "lstmstudy[torch,keras,nvml]"', 'pip install "lstmstudy @ git+https://github.com/x/y"',
                 '%pip install --quiet "lstmstudy[torch,keras,nvml,book]"'):
        with pytest.raises(AssertionError):
            test_no_line_installs_lstmstudy_from_an_index_or_a_missing_repository("README.md", line)
