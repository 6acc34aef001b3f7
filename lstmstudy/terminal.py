"""Keep the terminal readable: progress bars and one-line summaries, not library start-up chatter.

TensorFlow and its CUDA probe, and the PyTorch profiler (its "USDT ... profiler_start" lines), write from
C++ straight to file descriptor 2, past any Python setting (TF_CPP_MIN_LOG_LEVEL no longer holds them
back), and notebook kernels started by papermill inherit that descriptor. Python-level warnings and errors
are untouched, so what a reader must see still reaches the page or the terminal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """Send what native code writes to descriptor 2 to /dev/null for a block (a library's import)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


@contextmanager
def native_stderr_to(log: Path) -> Iterator[None]:
    """What native code and child processes (notebook kernels) write to descriptor 2 goes to `log` for a
    block, while this process's own `sys.stderr` (tqdm bars, warnings, errors) still reaches the terminal."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    terminal = os.dup(2)
    previous = sys.stderr
    with open(log, "a", encoding="utf-8") as handle:
        os.dup2(handle.fileno(), 2)
    sys.stderr = os.fdopen(os.dup(terminal), "w", buffering=1, encoding=previous.encoding or "utf-8",
                           errors="backslashreplace")
    try:
        yield
    finally:
        sys.stderr.flush()
        sys.stderr.close()
        sys.stderr = previous
        os.dup2(terminal, 2)
        os.close(terminal)
