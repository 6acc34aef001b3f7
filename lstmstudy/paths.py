"""Where the study's files are: its root (notebooks/, book/, _toc.yml, results/) and the logs of its native libraries.

Found the same way by every command, so that the package works from a wheel as from its checkout: the root is
`$LSTMSTUDY_ROOT` (what `--root` sets), else the checkout the package runs from (an editable install, as `make
install` makes), else the current folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from lstmstudy.errors import StudyError

#: the folder above the package: the checkout where the package runs from one, else site-packages
PACKAGE_PARENT = Path(__file__).resolve().parent.parent
#: the environment variable that names the study's root
ROOT_VARIABLE = "LSTMSTUDY_ROOT"


def is_checkout(folder: Path) -> bool:
    """Whether `folder` is a checkout of the study (its project file beside its package)."""
    return (folder / "pyproject.toml").is_file() and (folder / "lstmstudy").is_dir()


def study_root() -> Path:
    """`$LSTMSTUDY_ROOT`, else the checkout the package runs from, else the current folder."""
    if env := os.environ.get(ROOT_VARIABLE):
        return Path(env)
    return PACKAGE_PARENT if is_checkout(PACKAGE_PARENT) else Path.cwd()


def logs_folder(results_root: Path) -> Path:
    """Where native library logs (TensorFlow's C++ start-up, the profiler) go: a checkout's git-ignored
    `_build/logs`, elsewhere `logs/` in the results folder, never site-packages."""
    root = study_root()
    return root / "_build" / "logs" if is_checkout(root) else results_root / "logs"


def outside_the_study(found: str) -> StudyError:
    """The one-line error of a command that needs the study's notebooks or book and was run where there are none
    (from a wheel, in another folder)."""
    return StudyError(f"{found}: run this in a checkout of the study, or name one with --root or ${ROOT_VARIABLE}")
