"""The two houses: one measures, and needs torch, TensorFlow, Keras and NVML; the other renders and judges the
stored results, and needs pandas and seaborn. `block_measuring` shuts the first out of a process, so that
whatever runs there shows it renders without it: `lstmstudy reproduce --no-measure` starts every notebook
kernel so (`KERNEL_ARGUMENTS`), and the tests import the rendering house so.
"""

from __future__ import annotations

import importlib.abc
import sys

#: the measuring stack, by top-level package
MEASURING = ("torch", "tensorflow", "keras", "pynvml")


class MeasuringBlocked(importlib.abc.MetaPathFinder):
    """An import finder that refuses the measuring stack with one line saying why."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.split(".")[0] in MEASURING:
            raise ModuleNotFoundError(f"{name} belongs to the measuring house: rendering from stored results must "
                                      f"not import it (lstmstudy.houses)", name=name)
        return None


def measuring_loaded() -> list[str]:
    """The packages of the measuring stack this process has imported."""
    return sorted({name.split(".")[0] for name in sys.modules} & set(MEASURING))


def block_measuring() -> None:
    """Refuse every later import of the measuring stack in this process; one already imported is an error,
    since blocking could no longer show anything."""
    if loaded := measuring_loaded():
        raise RuntimeError(f"the measuring stack is already imported ({', '.join(loaded)}): block it first")
    if not any(isinstance(finder, MeasuringBlocked) for finder in sys.meta_path):
        sys.meta_path.insert(0, MeasuringBlocked())


#: the command-line arguments that make an IPython kernel block the measuring stack before its first cell
KERNEL_ARGUMENTS = ["--IPKernelApp.exec_lines=from lstmstudy.houses import block_measuring; block_measuring()"]
