"""The torchrun launch: how claim 7 (`lstmstudy.claims.parallel_training`) measures its points, as the sweep's
`GroupProtocol` (`Launch`).

Every point this machine can run is one group, measured in one `torchrun` run of N processes
(`lstmstudy.parallel.launch`), so that one device, DDP and the pipeline are timed in the same interleaved
rounds and the run starts (about 10 s) once. The run first checks that data parallel and the pipeline
match one device's losses and gradients (`check_text`); a mismatch makes every point an error. On a CPU the
run is that functional test only, on gloo: its points are stored `skipped`, never as a speed-up. A point
needing more devices than this node has is stored `skipped` before the run starts. Each timed call trains
on every timed batch once, so one warm-up round and a fixed number of rounds replace the sweep's plan.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from lstmstudy import contract, sweep
from lstmstudy.errors import Skip
from lstmstudy.observe import Observation
from lstmstudy.parallel import launch
from lstmstudy.timing import Measurement

#: relative difference of losses and gradients from one device's above which a scheme is wrong, not rounded
TOLERANCE = {"cpu": 1e-4, "cuda": 1e-3}
#: the process group's timeout: a collective that waits longer ends the run instead of hanging it
GROUP_TIMEOUT_S = 120
#: the run is stopped before this when it must end sooner for the deadline, though never under it
MIN_TIMEOUT_S = 60.0


class SchemesDisagree(RuntimeError):
    """Data parallel or the pipeline did not match one device's losses and gradients: no timing is stored."""


def check_text(check: dict | None, kind: str) -> tuple[bool, str]:
    """Whether data parallel and the pipeline matched one device (`worker.check`), in words."""
    if not check:
        return True, "one device only: nothing to compare"
    worst = max(max(c["loss_rel_diff"], c["grad_rel_diff"]) for c in check.values())
    complete = all(c["parameters"] == c["expected_parameters"] for c in check.values())
    ok = complete and worst <= TOLERANCE[kind]
    verb = "match" if ok else "DO NOT match"
    return ok, (f"DDP's and the pipeline's losses and gradients over two SGD steps {verb} one device's "
                f"(largest relative difference {worst:.1e}; tolerance {TOLERANCE[kind]:.0e})")


def spec(points: list[contract.Point], kind: str, quick: bool) -> dict:
    """The worker's spec (`lstmstudy.parallel.worker`) for `points`, which share the model's sizes."""
    shape = points[0].shape
    return {"device_kind": kind, "features": shape.features, "hidden": shape.hidden, "layers": shape.layers,
            "seed": int(points[0].config["seed"]), "micro_batches": int(points[0].config["micro_batches"]),
            "points": [{"id": str(i), "scheme": p.config["scheme"], "devices": p.config["devices"],
                        "config": dict(p.config)} for i, p in enumerate(points)],
            "rounds": 2 if quick else 5, "warmup": 1, "round_seed": 7, "check": True, "timeout_s": GROUP_TIMEOUT_S}


@dataclass(frozen=True)
class Launch(sweep.GroupProtocol):
    """One torchrun run for every point this machine can run (see the module). `visible(kind)` counts the
    devices a node has (GPUs on 'cuda'); `needs` starts the reason a point not measured here is stored with;
    `seconds_per_point` (by device kind) plans the run's time limit."""

    needs: str
    visible: Callable[[str], int]
    seconds_per_point: Mapping[str, float]
    quick: bool = False
    progress: bool = True

    def unavailable(self, point: contract.Point, device: torch.device) -> str | None:
        visible = self.visible(device.type) if device.type == "cuda" else 2
        if point.config["devices"] <= visible:
            return None
        return f"{self.needs[:-1]}; this node has {visible}): {point.config['devices']} were planned"

    def groups(self, points: list[contract.Point]) -> list[list[contract.Point]]:
        return [points] if points else []

    def timeout_s(self, points: int, kind: str) -> float:
        """The run's own time limit, a hang's end: a few times its plan."""
        return 240.0 if self.quick else max(600.0, 3 * points * self.seconds_per_point[kind])

    def measure(self, group: list[contract.Point], device: torch.device,
                ends: float | None) -> list[contract.PointResult | Exception]:
        kind, planned = device.type, self.timeout_s(len(group), device.type)
        timeout_s = planned if ends is None else min(planned, max(ends - time.monotonic(), MIN_TIMEOUT_S))
        try:
            got = launch.run(spec(group, kind, self.quick), max(p.config["devices"] for p in group),
                             timeout_s=timeout_s, progress=self.progress, desc=f"torchrun on {device}")
        except launch.TimedOut as exc:
            if timeout_s < planned:  # stopped for the deadline, not hung: the sweep decides what that leaves
                raise sweep.DeadlineReached(str(exc)) from None
            return [exc] * len(group)
        except launch.WorkerFailed as exc:
            return [exc] * len(group)
        agree, said = check_text(got.get("check"), kind)
        if not agree:
            return [SchemesDisagree(said)] * len(group)
        if kind == "cpu":
            return [Skip(f"{self.needs}: a functional test on gloo with {got['world_size']} CPU processes; {said}")
                    ] * len(group)
        return [self._result(got, i, said) for i in range(len(group))]

    @staticmethod
    def _result(got: dict, index: int, said: str) -> contract.PointResult:
        samples = tuple(got["samples"][str(index)])
        m = Measurement(samples, warmup=1, threads=got["threads"], sync="cuda", round_sizes=(1,) * len(samples),
                        seed=7)
        return contract.PointResult(m, observed=Observation("", {"check": said, "processes": got["world_size"]}))
