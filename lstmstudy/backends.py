"""Which Keras backend the study runs on, decided once, before anything imports Keras; which one a user's Keras
would run on (`user_backend`, what `lstmstudy explain` answers for); and fp32 as IEEE fp32 in every framework.

Keras picks TensorFlow unless told otherwise. On a GPU node without TensorFlow (HPC nodes, rented
boxes) that import fails, so when TensorFlow cannot be imported and `KERAS_BACKEND` is unset, the study
runs Keras on its torch backend and says so once. Every Keras result row records the backend
(`backend_for`), so a later TensorFlow run on the same machine is a different configuration.

Keras on its jax backend (`KERAS_BACKEND=jax`) is the study's compiled-graph counterpart where TensorFlow is
missing: its generic LSTM is a loop XLA compiles, and on a GPU its cuDNN path goes through `jax.experimental.rnn`.

Every framework runs fp32 as TF32 on Ampere and later GPUs unless told otherwise: `import_keras` turns it
off for TensorFlow and for jax, `ieee_fp32` for torch. This module imports none of them at its own import
(`import lstmstudy` stays light), only where a function needs one.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from lstmstudy.errors import StudyError

if TYPE_CHECKING:
    import torch

#: the environment variables that cap oneDNN's instruction set below the CPU's (oneDNN's own name, and its old one):
#: torch's oneDNN and TensorFlow's read them, but TensorFlow's own CPU check does not (`keras_kernels.unavailable`)
ISA_CAPS = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")

#: what the command line says once when the study chose the backend
CHOSEN_NOTE = "TensorFlow is not installed, so Keras runs on its torch backend (KERAS_BACKEND=torch)"


def importable(name: str) -> bool:
    """Whether `name` can be imported here: installed, and not blocked (`lstmstudy.houses`)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a blocked or broken package counts as missing
        return False


def isa_cap(environ: Mapping[str, str] | None = None) -> str:
    """The cap on oneDNN's instruction set in `environ` (this process's environment by default), as
    "ONEDNN_MAX_CPU_ISA=AVX2", or ''."""
    environ = os.environ if environ is None else environ
    return next((f"{name}={environ[name]}" for name in ISA_CAPS if environ.get(name)), "")


def chosen_note() -> str | None:
    """The line to show when this process (or the one that started it) chose the torch backend."""
    return CHOSEN_NOTE if os.environ.get("LSTMSTUDY_KERAS_BACKEND_CHOSEN") == "1" else None


def study_process(*, choose_backend: bool = True) -> None:
    """What the study's own processes set (the command line, the book's pages, the test suite), never a process that
    only imports the package: TensorFlow's C++ start-up logging and the PyTorch profiler's Kineto lines off (they
    would fill every page; errors still show; a value already set wins), and, with `choose_backend`, Keras on torch
    where TensorFlow is missing (`choose_keras_backend`): for measuring, never for an answer about the user's own
    Keras (`user_backend`). Call it before anything imports TensorFlow or Keras."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")
    # jax otherwise takes 75% of a GPU's memory at its first use, leaving torch kernels in the same process little
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if choose_backend:
        choose_keras_backend()


def choose_keras_backend() -> bool:
    """Set `KERAS_BACKEND=torch` when it is unset and TensorFlow cannot be imported; True if it did."""
    if "KERAS_BACKEND" in os.environ or importable("tensorflow"):
        return False
    os.environ["KERAS_BACKEND"] = "torch"
    os.environ["LSTMSTUDY_KERAS_BACKEND_CHOSEN"] = "1"  # child processes (notebook kernels) say it too
    return True


#: Keras 3's backends that run recurrent layers on a GPU, and the one it runs on where nothing names another
KERAS_BACKENDS = ("tensorflow", "torch", "jax")
KERAS_DEFAULT = "tensorflow"
#: every backend Keras 3 can import (keras/src/backend/__init__.py): any other name fails at `import keras`
KERAS_ALL_BACKENDS = (*KERAS_BACKENDS, "numpy", "openvino")


class UserBackend(NamedTuple):
    """The Keras backend a user's process would run on, and what chose it, in words ('KERAS_BACKEND=jax')."""

    name: str
    chosen_by: str


def user_backend(environ: Mapping[str, str] | None = None) -> UserBackend:
    """The backend the user's Keras runs on, read as Keras 3 reads it (keras/src/backend/config.py), without
    importing it: a Keras already imported in this process says; else `KERAS_BACKEND`, else the "backend" of
    `keras.json` in `$KERAS_HOME` (else ~/.keras, /tmp/.keras where the home folder is not writable), else Keras's
    default. What happens to be installed never chooses: the answer is for the user's setup, not this process's."""
    environ = os.environ if environ is None else environ
    if environ is os.environ and (keras := sys.modules.get("keras")) is not None:
        return UserBackend(keras.backend.backend(), "the Keras imported in this process")
    if backend := environ.get("KERAS_BACKEND"):  # Keras ignores it when empty
        return UserBackend(backend, f"KERAS_BACKEND={backend}")
    if "KERAS_HOME" in environ:
        home = Path(environ["KERAS_HOME"])
    else:
        base = Path(environ.get("HOME") or "~").expanduser()
        home = (base if os.access(base, os.W_OK) else Path("/tmp")) / ".keras"
    config = home.expanduser() / "keras.json"
    try:
        settings = json.loads(config.read_text())
    except (OSError, ValueError):  # Keras reads unparsable JSON as none (an unreadable file it cannot start with)
        settings = {}
    if isinstance(settings, dict) and "backend" in settings:  # even "" or null: Keras takes it, then fails to import
        return UserBackend(str(settings["backend"]), f"backend in {config}")
    return UserBackend(KERAS_DEFAULT, "Keras's default (no KERAS_BACKEND, no backend in keras.json)")


@cache
def import_keras():
    """Import Keras once, with its (and TensorFlow's) native start-up logs kept off the terminal.

    On TensorFlow, let GPU memory grow so torch kernels in the same process keep theirs, and pin fp32 to
    IEEE fp32: TensorFlow runs fp32 matmuls and cuDNN RNNs as TF32 by default on Ampere and later GPUs,
    while every torch step runs under `ieee_fp32`. On jax, the same: its default matmul precision runs fp32 as
    TF32 on those GPUs, so it is pinned to 'highest' (and `study_process` keeps jax from preallocating GPU memory).
    """
    from lstmstudy.terminal import quiet_native_stderr

    with quiet_native_stderr():
        import keras

        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            tf.config.experimental.enable_tensor_float_32_execution(False)
            for gpu in tf.config.list_physical_devices("GPU"):  # its CUDA probe logs from C++ on the first call
                try:
                    tf.config.experimental.set_memory_growth(gpu, True)
                except RuntimeError:  # TensorFlow already initialised its GPUs: their setting stands
                    pass
        elif keras.backend.backend() == "jax":
            import jax

            jax.config.update("jax_default_matmul_precision", "highest")
    return keras


#: the Keras releases the study is tested with (pyproject.toml's `keras` extra): it reads two of Keras's private
#: modules (`keras_private`), which any release may move
KERAS_TESTED = ">=3.10,<4"


def keras_private(module: str, name: str) -> Any:
    """`name` from one of Keras's private modules (`keras.src...`), or a one-line error that names the Keras installed
    and the range the study is tested with, where this release moved it."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise StudyError(f"{module}.{name} is not in this Keras ({metadata.version('keras')}): lstmstudy reads this "
                         f"private part of Keras and is tested with keras{KERAS_TESTED}") from None


@cache
def keras_backend() -> str:
    """The Keras backend in use ('tensorflow', 'torch', 'jax'); '' when Keras is not installed."""
    return import_keras().backend.backend() if importable("keras") else ""


def backend_for(kernel: str) -> str:
    """The backend a result row records: Keras's for `keras.*` kernels, '' for everything else."""
    return keras_backend() if kernel.startswith("keras.") else ""


@contextmanager
def torch_flag(owner: object, attr: str, value: object) -> Iterator[None]:
    """Set one torch.backends flag for a block and restore it, leaving every other flag alone."""
    before = getattr(owner, attr)
    setattr(owner, attr, value)
    try:
        yield
    finally:
        setattr(owner, attr, before)


@contextmanager
def ieee_fp32(device: torch.device | str) -> Iterator[None]:
    """On a GPU, fp32 in cuDNN's RNNs and cuBLAS's matmuls as IEEE fp32, not TF32, for a block (then restored).

    Public so that every fp32 step of the study (the torch kernels, Keras on torch, whole-model steps, the
    sweep) runs the same arithmetic. Elsewhere it changes nothing: the flags only steer CUDA libraries.
    """
    import torch

    with ExitStack() as stack:
        if torch.device(device).type == "cuda":
            stack.enter_context(torch_flag(torch.backends.cudnn.rnn, "fp32_precision", "ieee"))
            # cuDNN's convolutions too, for any convolution in a whole-model step. The legacy getter
            # `torch.backends.cudnn.allow_tf32` raises inside this block (torch refuses to read a mix of the
            # new per-operator settings through it): read `cudnn.rnn.fp32_precision` instead
            stack.enter_context(torch_flag(torch.backends.cudnn.conv, "fp32_precision", "ieee"))
            stack.enter_context(torch_flag(torch.backends.cuda.matmul, "fp32_precision", "ieee"))
        yield
