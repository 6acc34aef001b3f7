"""Measuring one point in a test: the sweep's own path (prepare, rounds, finish), briefly."""

from __future__ import annotations

import torch

from lstmstudy import contract, kernels, sweep
from lstmstudy.timing import Rounds

#: two short rounds: enough to check the plumbing, not to time anything
QUICK = Rounds(rounds=2, warmup=1, burst_s=0.0, burst_min_samples=2, extra_rounds=0)


def measure_one(point: contract.Point, device: str = "cpu", prepare: sweep.Prepare = kernels.prepare,
                plan: Rounds = QUICK) -> contract.PointResult:
    """The point's result, or the exception that ended it, raised."""
    outcome = sweep.measure_group([point], prepare, torch.device(device), plan)[0]
    if isinstance(outcome, Exception):
        raise outcome
    return outcome
