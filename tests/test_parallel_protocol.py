"""Claim 7's measuring side: the torchrun launch (`lstmstudy.protocols.torchrun`) turns a run's outcome into the rows
it always stored (tests/test_two_houses.py judges its stored sets without the measuring stack, as every claim's)."""

from __future__ import annotations

import torch

from lstmstudy import contract
from lstmstudy.claims import bucketing
from lstmstudy.claims import parallel_training as claim
from lstmstudy.errors import Skip
from lstmstudy.protocols import torchrun


def test_the_claim_names_claim_5s_plans():
    assert (claim.NO_BUCKETING, claim.BUCKETED) == (bucketing.PER_BATCH, bucketing.AUTO)


def _launch(monkeypatch, got: dict) -> torchrun.Launch:
    monkeypatch.setattr(torchrun.launch, "run", lambda spec, processes, **options: got)
    return torchrun.Launch(needs=claim.NEEDS, visible=lambda kind: 1, seconds_per_point=claim.CLAIM.seconds_per_point)


def test_a_cpu_run_is_a_functional_test_and_a_point_beyond_the_node_waits(monkeypatch):
    check = {"parameters": 4, "expected_parameters": 4, "loss_rel_diff": 2e-7, "grad_rel_diff": 0.0}
    launch = _launch(monkeypatch, {"check": {"ddp": check}, "world_size": 2})
    points: list[contract.Point] = claim.CLAIM.points("cpu", quick=True)
    outcomes = launch.measure(points, torch.device("cpu"), None)
    assert all(isinstance(o, Skip) for o in outcomes)
    assert str(outcomes[0]) == ("not measured (needs >= 2 GPUs): a functional test on gloo with 2 CPU processes; "
                                "DDP's and the pipeline's losses and gradients over two SGD steps match one "
                                "device's (largest relative difference 2.0e-07; tolerance 1e-04)")
    two = next(p for p in points if p.config["devices"] == 2)
    assert launch.unavailable(two, torch.device("cpu")) is None
    assert launch.unavailable(two, torch.device("cuda")) == \
        "not measured (needs >= 2 GPUs; this node has 1): 2 were planned"


def test_schemes_that_disagree_store_no_timing(monkeypatch):
    check = {"parameters": 4, "expected_parameters": 4, "loss_rel_diff": 0.5, "grad_rel_diff": 0.0}
    launch = _launch(monkeypatch, {"check": {"ddp": check}, "world_size": 2})
    outcomes = launch.measure(claim.CLAIM.points("cpu", quick=True), torch.device("cpu"), None)
    assert all(isinstance(o, torchrun.SchemesDisagree) and "DO NOT match" in str(o) for o in outcomes)
