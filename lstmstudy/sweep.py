"""Run a grid of configurations, one stored row each, resumable and robust to a failing point.

Each finished point is appended to the result set at once, so an interrupted sweep keeps every
finished row; rerunning the same sweep skips what is stored for this hardware (unless `rerun`).
A point that raises becomes an `error` row with the message and the sweep goes on; a point that
cannot run here raises `Skip(reason)` and becomes a `skipped` row with that reason.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch
from tqdm.auto import tqdm

from lstmstudy import hardware, results
from lstmstudy.errors import Skip
from lstmstudy.shapes import LSTMShape
from lstmstudy.timing import Measurement

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "fp16", "bf16")
PHASES = ("inference", "train")


@dataclass(frozen=True)
class Point:
    """One configuration of a sweep: a kernel at a shape, precision and phase, plus free-form extras."""

    kernel: str
    shape: LSTMShape
    precision: str = "fp32"
    phase: str = "inference"
    config: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, got {self.phase!r}")

    def key_fields(self) -> dict[str, object]:
        shape = self.shape.as_dict()
        return {"kernel": self.kernel, "precision": self.precision, "phase": self.phase,
                **{k: shape[k] for k in ("batch", "timesteps", "features", "hidden", "layers", "bidirectional")},
                "config": results.config_text(self.config)}

    def key(self) -> tuple[str, ...]:
        return results.row_key(self.key_fields())


@dataclass(frozen=True)
class Outcome:
    """What measuring a point produced, beyond the timing itself."""

    measurement: Measurement
    flops: float | None = None
    energy_j: float | None = None
    observed_kernel: str = ""


MeasurePoint = Callable[[Point, torch.device], Outcome]


@dataclass
class SweepReport:
    path: Path
    measured: int = 0
    skipped: int = 0
    errors: int = 0
    already_stored: int = 0
    stopped_early: bool = False

    def __str__(self) -> str:
        tail = ", stopped at the time budget" if self.stopped_early else ""
        return (f"{self.measured} measured, {self.skipped} skipped, {self.errors} errors, "
                f"{self.already_stored} already stored{tail} -> {self.path}")


def make_row(claim: str, point: Point, device: torch.device, fp: hardware.Fingerprint, *,
             outcome: Outcome | None = None, status: str = "ok", error: str = "") -> dict:
    """The stored row for one point: its key, the statistics and raw samples, and where it ran."""
    row: dict = {
        "claim": claim, **point.key_fields(), "framework": point.kernel.split(".", 1)[0],
        "device": str(device), "device_kind": device.type, "hardware_id": fp.hardware_id,
        "status": status, "error": error, "versions": fp.versions,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
    }
    if outcome is not None:
        m = outcome.measurement
        lo, hi = m.median_ci()
        row.update(threads=m.threads, n_samples=m.n, median_s=m.median, p25_s=m.p25, p75_s=m.p75,
                   ci_low_s=lo, ci_high_s=hi, samples_s=list(m.samples), flops=outcome.flops,
                   achieved_flops=outcome.flops / m.median if outcome.flops and m.median > 0 else None,
                   energy_j=outcome.energy_j, observed_kernel=outcome.observed_kernel)
    return row


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:500]


def run(claim: str, points: Iterable[Point], measure_point: MeasurePoint, *, device: str = "auto",
        root: Path | None = None, rerun: bool = False, time_budget_s: float | None = None,
        progress: bool = True) -> SweepReport:
    """Measure every point not yet stored for this hardware, appending one row per point."""
    dev = hardware.resolve_device(device)
    fp = hardware.fingerprint(dev)
    results.record_fingerprint(claim, fp.as_dict(), root)
    report = SweepReport(path=results.set_path(claim, fp.hardware_id, root))
    done = set() if rerun else results.done_keys(claim, fp.hardware_id, root)
    todo = []
    for point in points:
        if point.key() in done:
            report.already_stored += 1
        else:
            todo.append(point)
    start = time.monotonic()
    bar = tqdm(todo, desc=f"{claim} on {fp.hardware_id}", unit="config", disable=not progress)
    for finished, point in enumerate(bar):
        # the budget is checked between points, after at least one: every run makes progress
        if time_budget_s is not None and finished and time.monotonic() - start > time_budget_s:
            report.stopped_early = True
            log.warning("time budget of %.0f s reached: %d configs left for a later run",
                        time_budget_s, len(todo) - finished)
            break
        bar.set_postfix_str(f"{point.kernel} {point.precision} {point.phase} b{point.shape.batch} "
                            f"t{point.shape.timesteps} h{point.shape.hidden}")
        try:
            row = make_row(claim, point, dev, fp, outcome=measure_point(point, dev))
            report.measured += 1
        except Skip as exc:
            row = make_row(claim, point, dev, fp, status="skipped", error=str(exc))
            report.skipped += 1
        except Exception as exc:  # noqa: BLE001 - one failing config must not end the sweep
            if isinstance(exc, torch.cuda.OutOfMemoryError):
                torch.cuda.empty_cache()
            log.warning("%s failed: %s", point.kernel, _describe(exc))
            row = make_row(claim, point, dev, fp, status="error", error=_describe(exc))
            report.errors += 1
        results.append(claim, fp.hardware_id, [row], root)
    bar.close()
    return report
