"""Keep the terminal readable: progress bars and one-line summaries, not library start-up chatter; and keep a
log file readable: there a progress bar is a whole line at a time, not thousands of carriage returns.

TensorFlow and its CUDA probe, and the PyTorch profiler (its "USDT ... profiler_start" lines), write from
C++ straight to file descriptor 2, past any Python setting (TF_CPP_MIN_LOG_LEVEL no longer holds them
back), and notebook kernels started by papermill inherit that descriptor. Python-level warnings and errors
are untouched, so what a reader must see still reaches the page or the terminal.

A command's time limit ends it with SIGTERM, which by default kills Python on the spot; `sigterm_as_exit`
turns it into SystemExit for a block, so that the block's clean-up still runs.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from tqdm.auto import tqdm

#: how often a progress bar writes a line where its output is not a terminal (a log file, CI, a notebook)
LINE_EVERY_S = 30.0


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


class _Lines:
    """A stream for tqdm that turns each redraw into one whole line (the same line is written once)."""

    def __init__(self, out: TextIO) -> None:
        self.out, self.last = out, ""

    def write(self, text: str) -> int:
        line = text.replace("\r", "").strip()  # tqdm redraws with "\r", clears with spaces, ends with "\n"
        if line and line != self.last:
            self.out.write(line + "\n")
            self.last = line
        return len(text)

    def flush(self) -> None:
        self.out.flush()


def bar_options() -> dict[str, object]:
    """tqdm's options for a bar on stderr: redrawn in place on a terminal; elsewhere (a log file, CI) a whole
    line every `LINE_EVERY_S` seconds and at the end. Papermill's bar takes them too."""
    if sys.stderr.isatty():
        return {"file": sys.stderr}
    return {"file": _Lines(sys.stderr), "mininterval": LINE_EVERY_S, "ascii": True, "ncols": 120}


def progress(**options: object) -> tqdm:
    """A tqdm bar on stderr with `bar_options`, so that `make book > log` and CI keep a log a person can read."""
    return tqdm(**{**bar_options(), **options})


@contextmanager
def sigterm_as_exit() -> Iterator[None]:
    """While the block runs, SIGTERM raises SystemExit(143) instead of ending the process at once, so that its
    `finally` clauses run (main thread only, where signals are handled; a call that never returns to Python,
    a hang in native code, is still ended by the SIGKILL that follows)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def exit_(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, exit_)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
