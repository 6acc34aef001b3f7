"""Typed errors for the mistakes a user can make, so the CLI and notebooks can report them in one line."""

from __future__ import annotations

import json
import os
import re
from importlib import metadata
from urllib.parse import unquote, urlparse


class StudyError(Exception):
    """Base class: a problem the user can fix, reported without a traceback by the CLI."""


class DeviceUnavailable(StudyError):
    """A device was asked for that this machine does not have (for example `cuda` without a GPU)."""


class InvalidShape(StudyError, ValueError):
    """An LSTM shape with a size that is not a positive integer."""


class UnknownKernel(StudyError, KeyError):
    """A kernel name that is not in the registry."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class DeviceFailed(StudyError):
    """The GPU failed in a way that leaves this process unable to use it (an illegal address, say)."""


class WorkerFailed(StudyError):
    """A worker process of a sweep (`sweep.run`) ended without answering: killed, or crashed in native code."""


class Skip(StudyError):
    """A configuration that cannot run here (no GPU, no bf16 support, ...); the reason is stored."""


class ResultsCorrupt(StudyError):
    """A results file that cannot be parsed; it is reported by file and line and never overwritten."""


class PackRefused(StudyError):
    """A packed result set that `lstmstudy unpack` will not take in (over a cap, a link, a file or row of another
    set, a CSV without its fingerprint): packs come from strangers, and nothing of a refused one is written."""


class ParameterError(StudyError, ValueError):
    """A notebook or CLI parameter of the wrong type or value."""


class SpeedChanged(StudyError):
    """This machine runs at another speed than the run(s) that stored a set: rows of the two would be paired."""


class NoRecurrentLayers(StudyError):
    """A saved model without recurrent layers: readable, and nothing in it can miss cuDNN."""


class WeightsOnly(StudyError):
    """A file of saved weights (an .h5 without a model config): no model to explain, so skipped, not refused."""


class MissingDependency(StudyError):
    """An optional dependency that this installation lacks, named with the extra of the package that brings it."""

    def __init__(self, module: str, extra: str) -> None:
        super().__init__(f"this needs {module}, which is not installed here: {install_command(extra)}")
        self.module, self.extra = module, extra


def install_command(extra: str, *, windows: bool = os.name == "nt") -> str:
    """The command that adds `extra` to this lstmstudy: from the wheel or the folder pip installed it from, which pip
    recorded (PEP 610's direct_url.json). lstmstudy is on no package index, so `pip install lstmstudy[...]` would
    fetch another project's package of that name, if any: without a record, the command says what to name. On
    `windows` the path is a Windows path (C:\\...) in double quotes, which cmd.exe and PowerShell both read."""
    # the first installation with a record: a checkout's own lstmstudy.egg-info, first on the path there, has none
    texts = (dist.read_text("direct_url.json") for dist in metadata.distributions(name="lstmstudy"))
    try:
        recorded = json.loads(next((text for text in texts if text), "{}"))
    except ValueError:
        recorded = {}
    url = recorded.get("url", "")
    quote = '"' if windows else "'"
    if not url.startswith("file://"):
        return (f"pip install {quote}<the lstmstudy wheel or checkout you installed>[{extra}]{quote} (lstmstudy is "
                f"on no package index)")
    editable = "-e " if recorded.get("dir_info", {}).get("editable") else ""
    return f"pip install {editable}{quote}{_file_path(url, windows)}[{extra}]{quote}"


def _file_path(url: str, windows: bool) -> str:
    """The path a file:// URL names: '/work/lstm study'; on Windows 'C:\\Users\\x' or a share's '\\\\host\\share\\x'
    (by hand: `nturl2path` is deprecated from Python 3.14 and drops a share's host)."""
    parsed = urlparse(url)
    path = unquote(parsed.path)
    if not windows:
        return path
    if re.match(r"/[A-Za-z]:", path):
        path = path[1:]
    path = path.replace("/", "\\")
    return f"\\\\{parsed.netloc}{path}" if parsed.netloc not in ("", "localhost") else path


#: import names whose distribution is named otherwise (the others are named as they are imported)
DISTRIBUTIONS = {"yaml": "PyYAML", "pynvml": "nvidia-ml-py", "IPython": "ipython", "myst_nb": "myst-nb",
                 "jupyter_book": "jupyter-book", "sklearn": "scikit-learn", "PIL": "pillow"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extra_for(module: str) -> str:
    """The extra of the installed lstmstudy that brings the top-level `module` (its first, the narrowest), read
    from the package's own metadata (pyproject.toml's optional-dependencies); '' where none does or where the
    package is not installed (a copy of the tree)."""
    wanted = _normal(DISTRIBUTIONS.get(module, module))
    try:
        requirements = metadata.requires("lstmstudy") or []
    except metadata.PackageNotFoundError:
        return ""
    for requirement in requirements:
        name = re.match(r"[A-Za-z0-9._-]+", requirement)
        extra = re.search(r"""extra\s*==\s*["']([^"']+)""", requirement)
        if name and extra and _normal(name.group()) == wanted:
            return extra.group(1)
    return ""


def missing_dependency(exc: ModuleNotFoundError) -> MissingDependency | None:
    """The one-line error for an import that failed because an optional dependency of one of the package's extras is
    not installed; None for any other failed import, which keeps its traceback: a module installed but blocked
    (`houses`) or broken, or one no extra declares."""
    module = (exc.name or "").split(".")[0]
    if not (extra := extra_for(module)):
        return None
    try:
        metadata.version(DISTRIBUTIONS.get(module, module))
    except metadata.PackageNotFoundError:
        return MissingDependency(module, extra)
    return None
