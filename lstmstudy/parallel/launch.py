"""Start a claim 7 run: `torchrun` with one `lstmstudy.parallel.worker` process per device, as a subprocess.

A subprocess rather than `torch.multiprocessing` in this process: the workers start clean (no TensorFlow a
notebook kernel may have imported, `OMP_NUM_THREADS=1` for gloo on a CPU, a free port from torchrun's
standalone rendezvous), and a run that hangs is killed whole after `timeout_s`. torchrun runs in a session of
its own, so that it and its workers can be killed together; the signal a command's time limit sends
(SIGTERM) does not reach them there, so this process kills them on every way out, that one included. A
failed run is one line, `WorkerFailed`: the first worker's own error where one wrote it, else the end of
torchrun's output.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from tqdm.auto import tqdm

from lstmstudy import terminal
from lstmstudy.errors import StudyError
from lstmstudy.parallel.worker import PROGRESS


class WorkerFailed(StudyError):
    """A claim 7 run ended without a result: a worker raised, died, or the run passed its time limit."""


class TimedOut(WorkerFailed):
    """The run passed its time limit and was killed (a hang, or a limit cut short by a command's deadline)."""


def torchrun_command(processes: int, spec_path: Path) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
            "-m", "lstmstudy.parallel.worker", str(spec_path)]


def run(spec: dict, processes: int, *, timeout_s: float, progress: bool = True, desc: str = "claim 07") -> dict:
    """Run `spec` (see `worker`) on `processes` processes and return rank 0's result."""
    with tempfile.TemporaryDirectory(prefix="lstmstudy-parallel-") as tmp:
        folder = Path(tmp)
        spec_path = folder / "spec.json"
        spec_path.write_text(json.dumps({**spec, "out": str(folder)}))
        env = dict(os.environ)
        if spec["device_kind"] == "cpu":
            env["OMP_NUM_THREADS"] = "1"  # processes share the cores; one thread each, stated in the fingerprint
        tail: collections.deque[str] = collections.deque(maxlen=40)
        bar = terminal.progress(total=spec["warmup"] + spec["rounds"], desc=desc, unit="round", disable=not progress)
        reader = None
        with terminal.sigterm_as_exit():  # before torchrun starts: from then on, no way out leaves it running
            proc = subprocess.Popen(torchrun_command(processes, spec_path), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
            try:
                reader = threading.Thread(target=_read, args=(proc, tail, bar), daemon=True)
                reader.start()
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                raise TimedOut(f"the {processes}-process run passed its time limit of {timeout_s:.0f} s and was "
                               f"stopped") from None
            finally:
                if proc.poll() is None:  # a time limit, Ctrl-C, SIGTERM, an error: never leave the workers running
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                if reader is not None:
                    reader.join(timeout=5)
                bar.close()
        result = folder / "result.json"
        if code != 0 or not result.exists():
            raise WorkerFailed(f"the {processes}-process run failed (exit status {code}): {_first_error(folder, tail)}")
        return json.loads(result.read_text())


def _read(proc: subprocess.Popen, tail: collections.deque, bar: tqdm) -> None:
    for line in proc.stdout:
        if line.startswith(PROGRESS):
            bar.update(1)
        else:
            tail.append(line.rstrip())


def _first_error(folder: Path, tail: collections.deque) -> str:
    """The first line of the lowest rank's error file, else the last line of output that names an error."""
    for path in sorted(folder.glob("error-*.txt")):
        return f"rank {path.stem.removeprefix('error-')}: {path.read_text().splitlines()[0]}"
    named = [line for line in tail if "Error" in line or "error" in line]
    return (named or list(tail) or ["no output"])[-1].strip()[:500]
