"""Run a grid of configurations, one stored row each, resumable and robust to a failing point.

The points a claim compares (every kernel, precision and setting at one shape and phase) form a group:
each is prepared (built, checked), then the group is timed in interleaved rounds (`timing.interleave`),
so that its ratios are formed within rounds. Each finished group is appended to the result set at
once, so an interrupted sweep keeps every finished row; rerunning the same sweep skips what is stored
for this hardware (unless `rerun`). A point that raises becomes an `error` row with the message and the
sweep goes on, unless the error poisons the process's CUDA context (then the sweep stops, keeping every
finished row); a point that cannot run here raises `Skip(reason)` and becomes a `skipped` row. Under a
deadline, a group still running when it passes is interrupted (`Deadline.guard`), so that one point far
longer than planned cannot hold a command past its limit, nor every later command after it. A group that
cannot be interrupted (a hang in native code: NCCL, a CUPTI flush, cuDNN) ends only when its process is
killed; its rows then say so (`results.running`), and the next call stores them as errors and goes on.

A protocol that measures a whole group at once (claim 7's torchrun launch: N processes started once for
every point) is passed in place of a `Prepare` as a `GroupProtocol`: it chooses the groups and measures
each, and the sweep still does everything else.
"""

from __future__ import annotations

import faulthandler
import gc
import os
import pickle
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import torch
from tqdm.auto import tqdm

from lstmstudy import hardware, results, terminal
from lstmstudy.backends import ieee_fp32
from lstmstudy.contract import Point, PointResult, Prepared
from lstmstudy.errors import DeviceFailed, Skip, SpeedChanged, StudyError, WorkerFailed
from lstmstudy.observe import device_time
from lstmstudy.timing import Queued, Rounds, interleave

#: prepare(point, device): a `Prepared` point to time in the group's rounds, or, for a point measured its
#: own way (an energy window, profiled sessions), its finished `PointResult`
Prepare = Callable[[Point, torch.device], "Prepared | PointResult"]


class GroupProtocol(ABC):
    """A protocol that measures a whole group in one go, in place of preparing each point here and timing the
    group's rounds (`measure_group`): one launch of several processes, say, that a point alone cannot make.
    The sweep still resumes, fingerprints, stores every row and keeps the deadline, planning each group as a
    slow one; a protocol that stops a group for the deadline raises `DeadlineReached`, as the sweep's own
    alarm does, so that a later group of a call is left for the next call rather than stored as an error."""

    def unavailable(self, point: Point, device: torch.device) -> str | None:
        """Why `point` cannot run on this machine at all (it is stored `skipped` with this reason before the
        first group starts, so that a group which hangs until the command is killed cannot lose it), or None."""
        return None

    @abstractmethod
    def groups(self, points: list[Point]) -> list[list[Point]]:
        """The points measured together, in order (in place of `groups`)."""

    @abstractmethod
    def measure(self, group: list[Point], device: torch.device,
                ends: float | None) -> list[PointResult | Exception]:
        """One result (or the exception that ended it, a `Skip` among them) per point of `group`, in order;
        `ends` is when the group must end (a time.monotonic() value; None without a deadline)."""


#: CUDA errors after which the process's CUDA context is unusable: every later point would fail too.
#: An out-of-memory error is not one of them (it is one error row and the sweep goes on).
_FATAL_CUDA = re.compile(r"illegal (memory access|address|instruction)|unspecified launch failure|"
                         r"cudaErrorLaunchFailure|cudaErrorIllegalAddress|device-side assert|misaligned address|"
                         r"uncorrectable ECC|CUDA error: unknown error", re.IGNORECASE)


def is_fatal_cuda_error(exc: BaseException) -> bool:
    """True for a CUDA error that poisons the process (illegal address, launch failure, device assert)."""
    return not isinstance(exc, torch.cuda.OutOfMemoryError) and bool(_FATAL_CUDA.search(str(exc)))


#: what a slow point (a cold torch.compile, a masked Keras loop on 8 layers) may take, for the deadline:
#: a cold compile of the T=100 training step took 69 s on a 2-core CPU
SLOW_POINT_S = 120.0
#: after a group's time is up, the alarm fires again this often (a handler delayed by native code, or an
#: exception a library swallowed), though not in the first `UNWIND_S` after it raised (the group's clean-up
#: as the exception unwinds: a profiler's flush, a monitor's join); and once, `HANG_TRACEBACK_S` after, every
#: thread's traceback goes to fd 2 (`lstmstudy measure`: its native log): a group hung in native code cannot
#: be interrupted, but the log shows where it hung
REARM_S, UNWIND_S = 5.0, 30.0
HANG_TRACEBACK_S = 30.0
#: the error of each point of a group whose process was killed before it finished (`results.running`)
CUT_OFF = ("CutOff: the call that measured this group (from {started}) was killed before the group finished: "
           "a hang in native code, or the command's time limit; measured again only with --retry-errors")


def device_still_works(device: torch.device) -> bool:
    """After a failed point on a GPU: can the CUDA context still run a kernel? (Some failures that poison
    it, such as cuDNN's EXECUTION_FAILED, carry no telling message.) Always True on a CPU."""
    if device.type != "cuda":
        return True
    try:
        torch.cuda.synchronize(device)
        (torch.ones(8, device=device) * 2).sum().item()
        return True
    except Exception:  # noqa: BLE001 - whatever the error, this process can no longer measure
        return False


class DeadlineReached(BaseException):
    """Raised inside a running group when the command's deadline passes (`Deadline.guard`). A BaseException,
    so that the clauses keeping one failing point from ending its group (`except Exception`) let it through."""


@dataclass
class Deadline:
    """When a measuring command must stop, checked between groups of points across every claim it runs.

    A group is started only if the longest group of its claim seen so far (or, for a slow kernel's point,
    `SLOW_POINT_S` if that is longer: a compile or a masked Keras loop) would still end before the
    deadline, and the first group of a command always starts, so every call makes progress and the next
    one resumes. The time held back is each claim's own: a claim of quick groups is not kept from the
    deadline's last minute by another's long ones. A group still running when it must end (`ends_next_group`)
    is interrupted (`guard`).
    """

    at: float | None = None  # a time.monotonic() value; None: no deadline
    seconds: float | None = None  # the whole deadline, as given
    longest_s: dict[str, float] = field(default_factory=dict)  # per claim
    started: int = 0

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        return cls(None if seconds is None else time.monotonic() + seconds, seconds)

    def ends_next_group(self) -> float | None:
        """When the next group must end (a time.monotonic() value; None without a deadline). The first group
        of a call gets the whole deadline from its own start, however long the set-up before it took, and at
        least `SLOW_POINT_S`, so that every call makes progress; a later one must end by the deadline."""
        if self.at is None:
            return None
        if self.started == 0:
            return max(self.at, time.monotonic() + max(self.seconds or 0.0, SLOW_POINT_S))
        return self.at

    def allows_another(self, claim: str, slow: bool = False) -> bool:
        if self.at is None or self.started == 0:
            return True
        return time.monotonic() + max(self.longest_s.get(claim, 0.0), SLOW_POINT_S if slow else 0.0) <= self.at

    def record(self, claim: str, seconds: float) -> None:
        self.started += 1
        self.longest_s[claim] = max(self.longest_s.get(claim, 0.0), seconds)

    @contextmanager
    def guard(self) -> Iterator[None]:
        """Raise `DeadlineReached` in the group run inside if it is still running when it must end
        (`ends_next_group`; SIGALRM, re-armed every `REARM_S`: without a deadline, or off the main thread,
        where signals cannot be caught, it does nothing). A Python loop is stopped at its next bytecode; a
        single native call (one cuDNN kernel, a compile's subprocess) is let finish first, and one that never
        returns gets every thread's traceback written to fd 2 `HANG_TRACEBACK_S` later. Not nested."""
        ends = self.ends_next_group()
        if ends is None or threading.current_thread() is not threading.main_thread():
            yield
            return
        armed, allowed, raised = True, ends - time.monotonic(), None

        def interrupt(signum: int, frame: object) -> None:
            nonlocal raised
            if armed and (raised is None or time.monotonic() - raised >= UNWIND_S):
                raised = time.monotonic()
                raise DeadlineReached(f"it ran past the {allowed:.0f} s it could have")

        previous = signal.signal(signal.SIGALRM, interrupt)
        stderr = sys.__stderr__
        try:
            signal.setitimer(signal.ITIMER_REAL, max(allowed, 1e-3), REARM_S)
            if stderr is not None:
                faulthandler.dump_traceback_later(max(allowed, 0.0) + HANG_TRACEBACK_S, file=stderr)
            yield
            armed = False
        finally:
            armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            faulthandler.cancel_dump_traceback_later()
            signal.signal(signal.SIGALRM, previous)


@dataclass
class SweepReport:
    claim: str
    path: Path
    measured: int = 0
    skipped: int = 0
    errors: int = 0
    already_stored: int = 0
    errors_not_retried: int = 0
    left: int = 0  # points not started because the deadline came
    cut_off: int = 0  # error rows stored at the start for a group an earlier call was killed in
    processes: int = 1  # the worker processes whose passes ran (`run`)

    def __str__(self) -> str:
        text = (f"{self.claim}: {self.measured} measured, {self.skipped} skipped, {self.errors} errors, "
                f"{self.already_stored} already stored")
        if self.cut_off:
            text += f", {self.cut_off} stored as errors: an earlier call was killed measuring them"
        if self.errors_not_retried:
            text += f", {self.errors_not_retried} stored errors not retried (--retry-errors)"
        if self.left:
            text += f", {self.left} left for the next call (deadline)"
        if self.processes > 1:
            text += f", timed in {self.processes} worker processes"
        return f"{text} -> {self.path}"


def make_row(claim: str, point: Point, device: torch.device, fp: hardware.Fingerprint, *,
             outcome: PointResult | None = None, status: str = "ok", error: str = "",
             conditions: dict | None = None, process: int = 0) -> dict:
    """The stored row for one point: its key, the statistics and raw samples (by round), where it ran, the
    fingerprint that produced it, the machine's `conditions` before it (`hardware.conditions`) and which worker
    `process` of its run timed it (`run`)."""
    row: dict = {
        "claim": claim, **point.key_fields(), "framework": point.kernel.split(".", 1)[0],
        "device": str(device), "device_kind": device.type, "hardware_id": fp.hardware_id,
        "status": status, "error": error, "versions": fp.versions, "fingerprint_id": fp.id, **(conditions or {}),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="microseconds"), "process": process,
    }
    if outcome is not None:
        m = outcome.measurement
        lo, hi = m.median_ci()
        row.update(threads=m.threads, n_samples=m.n, median_s=m.median, p25_s=m.p25, p75_s=m.p75,
                   ci_low_s=lo, ci_high_s=hi, samples_s=list(m.samples), round_sizes=list(m.round_sizes),
                   round_seed=m.seed, noisy=m.noisy, flops=outcome.flops,
                   achieved_flops=outcome.flops / m.median if outcome.flops and m.median > 0 else None,
                   energy_j=outcome.energy_j, observed_kernel=outcome.observed.kernel,
                   observed_detail=outcome.observed.detail_text(), predicted_kernel=outcome.predicted_kernel,
                   compute_dtype=outcome.compute_dtype, timer=m.timer)
        if outcome.device is not None:
            row.update(device_s=outcome.device.seconds, kernels_per_call=outcome.device.kernels)
    return row


def describe(exc: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


def label(point: Point) -> str:
    s = point.shape
    return f"{point.kernel} {point.precision} {point.phase} b{s.batch} t{s.timesteps} h{s.hidden}"


def groups(points: Iterable[Point], slow: frozenset[str] = frozenset()) -> list[list[Point]]:
    """The points timed together, in the order of their first point: those at one shape and phase (every
    kernel, precision and setting there). A point of a `slow` kernel (a compile, a masked Keras loop) is
    a group of its own: a sample takes long enough that interleaving gains little, and the deadline
    (`SLOW_POINT_S`) plans for one such point at a time."""
    out: dict[tuple, list[Point]] = {}
    for index, point in enumerate(points):
        out.setdefault((point.phase, point.shape) if point.kernel not in slow else (index,), []).append(point)
    return list(out.values())


def measure_group(points: list[Point], prepare: Prepare, device: torch.device,
                  plan: Rounds) -> list[PointResult | Exception]:
    """Prepare every point, time the prepared ones in interleaved rounds, and finish each: one result (or
    the exception that ended it, a `Skip` among them) per point, in order."""
    out: list[PointResult | Exception | None] = [None] * len(points)
    ready: dict[int, Prepared] = {}
    for index, point in enumerate(points):
        try:
            got = prepare(point, device)
        except Exception as exc:  # noqa: BLE001 - one failing point must not end the group
            out[index] = exc
            continue
        if isinstance(got, PointResult):
            out[index] = got
        else:
            ready[index] = got
    timed = interleave({i: (p.step, p.sync) for i, p in ready.items()}, plan) if ready else {}
    for index, m in timed.items():
        try:
            out[index] = m if isinstance(m, Exception) else _with_device_time(ready[index].finish(m), ready[index],
                                                                               device)
        except Exception as exc:  # noqa: BLE001
            out[index] = exc
    return out


def _with_device_time(result: PointResult, prepared: Prepared, device: torch.device) -> PointResult:
    """`result` with the GPU's own time per call of its step (`observe.device_time`, one profiled pass after the
    rounds), where its protocol did not measure it; unchanged on a CPU, for a step without a sync (one that times
    itself: an energy window), and where the profiler fails (the timed row stands without device time, which its page
    then says) unless the failure poisoned the CUDA context."""
    if result.device is not None or device.type != "cuda" or prepared.sync is None:
        return result  # no sync: a step timed its own way (an energy window), which one more call would repeat
    step = prepared.step.step if isinstance(prepared.step, Queued) else prepared.step
    try:
        return replace(result, device=device_time(step, prepared.sync, device))
    except Exception as exc:  # noqa: BLE001 - a profiler's failure costs the row its device time, not its timing
        if is_fatal_cuda_error(exc):
            raise
        return result


def _rows(claim: str, group: list[Point], outcomes: list[PointResult | Exception], dev: torch.device,
          fp: hardware.Fingerprint, conditions: dict, report: SweepReport,
          bar: tqdm) -> tuple[list[dict], tuple[Point, Exception] | None]:
    """A group's rows, one per outcome, counted in `report`; and the first point whose failure left the process
    unable to measure (a CUDA context an error poisoned), with that error, or None."""
    rows, unusable = [], None
    for point, outcome in zip(group, outcomes):
        if isinstance(outcome, PointResult):
            rows.append(make_row(claim, point, dev, fp, outcome=outcome, conditions=conditions))
            report.measured += 1
        elif isinstance(outcome, Skip):
            rows.append(make_row(claim, point, dev, fp, status="skipped", error=str(outcome), conditions=conditions))
            report.skipped += 1
        else:
            if isinstance(outcome, torch.cuda.OutOfMemoryError):
                gc.collect()
                torch.cuda.empty_cache()
            bar.write(f"{claim}: {label(point)} failed: {describe(outcome)}")
            rows.append(make_row(claim, point, dev, fp, status="error", error=describe(outcome), conditions=conditions))
            report.errors += 1
            if unusable is None and not isinstance(outcome, DeadlineReached) and (
                    is_fatal_cuda_error(outcome) or not device_still_works(dev)):
                unusable = (point, outcome)
    return rows, unusable


def _store_unavailable(claim: str, todo: list[Point], protocol: GroupProtocol, dev: torch.device,
                       fp: hardware.Fingerprint, report: SweepReport, root: Path | None) -> list[Point]:
    """Store a `skipped` row for each point `protocol` cannot run here, at once, and return the others."""
    conditions, rows, rest = hardware.conditions(), [], []
    for point in todo:
        reason = protocol.unavailable(point, dev)
        if reason is None:
            rest.append(point)
        else:
            rows.append(make_row(claim, point, dev, fp, status="skipped", error=reason, conditions=conditions))
    if rows:
        results.append(claim, fp.hardware_id, rows, root)
        report.skipped += len(rows)
    return rest


#: what ends the set id of a run that measures beside a stored set of its id whose runs recorded no speed (`own_set`)
OWN_SET_SUFFIX = "calibrated"


def own_set(claim: str, fp: hardware.Fingerprint, root: Path | None, rerun: bool) -> hardware.Fingerprint:
    """`fp`, or, where the stored set of its id comes only from runs that recorded no speed calibration (stored before
    runs were calibrated, perhaps on another machine of that id), `fp` naming a set of its own (`OWN_SET_SUFFIX`),
    said in one line: its rows would otherwise join rows whose machine and speed nothing can compare with its own.
    `rerun` measures the stored set again instead (the pages read the newest rows)."""
    stored = results.fingerprints(claim, root).get(fp.hardware_id, [])
    if rerun or fp.calibration_s is None or not stored or any(f.get("calibration_s") for f in stored):
        return fp
    own = replace(fp, set_suffix=OWN_SET_SUFFIX)
    print(f"note: {claim}: the runs that stored {fp.hardware_id} recorded no speed, so this machine's rows cannot be "
          f"paired with theirs: measuring into a set of its own, {own.hardware_id} (--rerun measures "
          f"{fp.hardware_id} again instead)", file=sys.stderr)
    return own


def check_speed(claim: str, fp: hardware.Fingerprint, root: Path | None = None) -> None:
    """Refuse to add rows to a set whose stored runs ran at another speed (`hardware.calibrate`, the device's
    arithmetic, and `hardware.calibrate_host`, the host's launches): the claims pair rows of one set in ratios, and
    rows timed 2x apart in speed would make each ratio 2x wrong. Most GPU rows are host-bound, so either may differ."""
    stored = results.fingerprints(claim, root).get(fp.hardware_id, [])
    for field_name, what in (("calibration_s", "speed calibration"),
                             ("host_calibration_s", "host's launch calibration")):
        now, before = getattr(fp, field_name), [f[field_name] for f in stored if f.get(field_name)]
        if not before or now is None:
            continue
        typical = statistics.median_high(before)
        apart = hardware.speed_ratio(now, typical)
        if apart > hardware.SPEED_TOLERANCE:
            raise SpeedChanged(
                f"{claim} on {fp.hardware_id}: this machine ran the {what} in {now * 1e3:.3g} ms, the runs that "
                f"stored this set in {typical * 1e3:.3g} ms ({apart:.1f}x apart): its rows would be paired with rows "
                f"timed at another speed. Measure the whole set again at this speed with --rerun (the pages read the "
                f"newest rows), or measure on the machine that stored it")


def run(claim: str, points: Iterable[Point], prepare: Prepare | GroupProtocol, plan: Rounds = Rounds(), *,
        device: str = "auto", root: Path | None = None, rerun: bool = False, retry_errors: bool = False,
        deadline: Deadline | None = None, slow: frozenset[str] = frozenset(), progress: bool = True,
        processes: int | None = None) -> SweepReport:
    """Measure every point not yet stored for this hardware, group by group (`groups`, `measure_group`),
    appending each group's rows at once; or, with a `GroupProtocol`, its groups, each measured whole.

    The rounds are spread over `processes` worker processes (the plan's `Rounds.processes` when None; a
    `GroupProtocol` starts its own): this one times every point's share (`Rounds.each`) as worker 0, then each
    other worker, a fresh interpreter started after the one before it ends, times its share of every point
    (`_in_worker`); each stores its own rows (`process`), and `results.load` joins them. Stored `ok` and
    `skipped` rows are done; a stored `error` is measured again only with `retry_errors` (the file keeps both
    rows, `results.load` shows the newer). fp32 means IEEE fp32 throughout (no TF32), whichever framework runs
    the step.
    """
    points = list(points)
    workers = 1 if isinstance(prepare, GroupProtocol) else plan.processes if processes is None else processes
    deadline = deadline or Deadline()
    options = dict(device=device, root=root, rerun=rerun, retry_errors=retry_errors, slow=slow, progress=progress)
    share = replace(plan, processes=workers).each()  # one process (a lease's call) times every round itself
    report = run_process(claim, points, prepare, share, process=0, deadline=deadline, **options)
    if workers > 1 and torch.cuda.is_initialized():
        gc.collect()
        torch.cuda.empty_cache()  # what this process holds of the GPU is not the workers' to lose
    for process in range(1, workers):
        if report.left:
            break  # the deadline came: the next call resumes worker 0's points first
        more, done = _in_worker(dict(claim=claim, points=points, prepare=prepare, plan=share, process=process,
                                     deadline=deadline, **options))
        deadline.started, deadline.longest_s = done.started, done.longest_s
        report.processes += bool(more.measured or more.errors or more.skipped)
        report.measured = max(report.measured, more.measured)  # points, not rows: each worker times them all
        report.already_stored = min(report.already_stored, more.already_stored)
        report.errors += more.errors
        report.left = more.left
    return report


#: what a worker process runs (`_in_worker`)
WORKER = "import sys; from lstmstudy.sweep import worker_main; worker_main(sys.argv[1], sys.argv[2], int(sys.argv[3]))"


def _in_worker(job: dict) -> tuple[SweepReport, Deadline]:
    """`run_process(**job)` in a fresh interpreter (`WORKER`), its report and its deadline's
    record back: the job and the answer travel as pickles in a scratch folder, the worker's bars go to this
    process's stderr and its native logs wherever this process's go. An error the worker raised is raised here."""
    with tempfile.TemporaryDirectory(prefix="lstmstudy-worker-") as scratch:
        task, answer = Path(scratch, "job.pickle"), Path(scratch, "answer.pickle")
        task.write_bytes(pickle.dumps(job))
        try:
            bars = sys.stderr.fileno()
        except (AttributeError, OSError, ValueError):  # a notebook's stream: the worker's bars go to fd 2
            bars = 2
        sys.stderr.flush()
        worker = subprocess.Popen([sys.executable, "-c", WORKER, str(task), str(answer), str(bars)],
                                  pass_fds=(bars,) if bars != 2 else ())
        try:
            with terminal.sigterm_as_exit():
                worker.wait()
        except BaseException:  # Ctrl-C, a SIGTERM to this process alone: the worker must not measure on, orphaned
            worker.terminate()  # its group's rows are taken back (`results.running`) as this process's would be
            try:
                worker.wait(timeout=UNWIND_S)
            except subprocess.TimeoutExpired:
                worker.kill()
            raise
        if not answer.exists():
            raise WorkerFailed(f"{job['claim']}: worker process {job['process']} ended with status {worker.returncode} "
                               f"before answering; every finished row is stored: run the command again to resume")
        got = pickle.loads(answer.read_bytes())
    if isinstance(got, BaseException):
        raise got
    return got


def worker_main(task: str, answer: str, bars: int) -> None:
    """A worker process's body (`_in_worker`): run the job, write its answer (or the error it raised)."""
    from lstmstudy.backends import study_process

    study_process()
    if bars != 2:
        sys.stderr = os.fdopen(bars, "w", buffering=1, errors="backslashreplace")
    job = pickle.loads(Path(task).read_bytes())
    try:
        got: object = (run_process(**job), job["deadline"])
    except (StudyError, DeadlineReached) as exc:
        got = exc
    Path(answer).write_bytes(pickle.dumps(got))


def run_process(claim: str, points: list[Point], prepare: Prepare | GroupProtocol, plan: Rounds, *, process: int,
                device: str, root: Path | None, rerun: bool, retry_errors: bool, deadline: Deadline,
                slow: frozenset[str], progress: bool) -> SweepReport:
    """One worker's pass of `run`: every point this `process` has not stored yet, timed in `plan`'s rounds."""
    dev = hardware.resolve_device(device)
    with ieee_fp32(dev):  # the arithmetic every row of the sweep holds
        fp = replace(hardware.fingerprint(dev), calibration_s=hardware.calibrate(dev),
                     host_calibration_s=hardware.calibrate_host(dev) if dev.type == "cuda" else None)
    fp = own_set(claim, fp, root, rerun)
    if not rerun:
        check_speed(claim, fp, root)
    results.record_fingerprint(claim, fp.as_dict(), root)
    report = SweepReport(claim=claim, path=results.set_path(claim, fp.hardware_id, root),
                         cut_off=results.store_cut_off(claim, fp.hardware_id, root))
    done, failed = (set(), set()) if rerun else results.stored_keys(claim, fp.hardware_id, root, process)
    if retry_errors:
        failed = set()
    todo = []
    for point in points:
        key = point.key()
        if key in done:
            report.already_stored += 1
        elif key in failed:
            report.errors_not_retried += 1
        else:
            todo.append(point)
    whole = prepare if isinstance(prepare, GroupProtocol) else None
    if whole is not None:
        todo = _store_unavailable(claim, todo, whole, dev, fp, report, root)
    bar = terminal.progress(total=len(todo), desc=f"{claim} on {fp.hardware_id}", unit="config", disable=not progress)
    left = len(todo)
    with ieee_fp32(dev):
        for group in whole.groups(todo) if whole is not None else groups(todo, slow):
            if not deadline.allows_another(claim, slow=whole is not None or group[0].kernel in slow):
                report.left = left
                break
            bar.set_postfix_str(label(group[0]) + (f" and {len(group) - 1} more" if len(group) > 1 else ""))
            start, conditions, gpu_before = time.monotonic(), hardware.conditions(), hardware.gpu_state(dev)
            started = datetime.now(timezone.utc).isoformat(timespec="seconds")
            cut_off = [make_row(claim, point, dev, fp, status="error", error=CUT_OFF.format(started=started),
                                conditions=conditions, process=process) for point in group]
            # a SIGTERM (a time limit reached while the group runs in Python) takes the rows back: only a process
            # that cannot answer it, hung in native code until the SIGKILL after, leaves them
            with terminal.sigterm_as_exit(), results.running(claim, fp.hardware_id, cut_off, root):
                first, outcomes = deadline.started == 0, None
                try:
                    with deadline.guard():
                        outcomes = (whole.measure(group, dev, deadline.ends_next_group()) if whole is not None
                                    else measure_group(group, prepare, dev, plan))
                except DeadlineReached as reached:
                    if outcomes is None:  # else the alarm came after the group finished: its rows stand
                        if not first:  # a fresh call, where it comes first, may finish it
                            deadline.record(claim, time.monotonic() - start)
                            report.left = left
                            break
                        # it had a whole deadline: an error row each, so the next call goes on
                        outcomes = [DeadlineReached(f"{reached} as a call's first group, before its timing finished: "
                                                    "one call with this deadline cannot measure it; use a longer "
                                                    "--deadline, or none, with --retry-errors") for _ in group]
                rows, unusable = _rows(claim, group, outcomes, dev, fp, conditions, report, bar)
                state = {"start": gpu_before, "end": hardware.gpu_state(dev)} if gpu_before else None
                for row in rows:
                    row.update(process=process, gpu_state=state)
                deadline.record(claim, time.monotonic() - start)
                results.append(claim, fp.hardware_id, rows, root)
            bar.update(len(group))
            left -= len(group)
            if unusable is not None:
                bar.close()
                point, exc = unusable
                raise DeviceFailed(
                    f"{claim}: {label(point)} hit a CUDA error that leaves this process unusable "
                    f"({describe(exc)}); every finished row is stored, this point as an error. Run the "
                    f"command again to resume (it skips this point unless --retry-errors).")
    bar.close()
    return report
