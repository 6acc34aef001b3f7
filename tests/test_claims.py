"""The claim contract: one list of claims, one name each, default grids per device kind that fit a GPU lease."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest
from registered import differences

from lstmstudy import backends, claims
from lstmstudy.claims import DEVICE_KINDS, GPU_ORDER, lookup, registry
from lstmstudy.claims.frameworks_vs_baseline import IN_KERNEL, LOOP, QUEUED
from lstmstudy.contract import AUTOCAST
from lstmstudy.results import config_text
from lstmstudy.errors import ParameterError
from lstmstudy.rules import (Outcome, combine, crossover, crossover_possible, holds_below, holds_from, one_burst_sets,
                             settle)

ROOT = Path(__file__).resolve().parent.parent
#: what the default grids of the first five claims of `GPU_ORDER` may take, and all of them, the kernel benchmark
#: included (a short lease measures the five first on their lease grids: `test_the_lease_measures_...`)
FIRST, FIRST_S, ALL_S = 5, 21 * 60, 36 * 60


def test_the_registry_numbers_the_claims_in_order_then_the_kernel_benchmark():
    entries = registry()
    numbers = [f"{i:02d}" for i in range(1, len(entries))]
    problem = differences([c.number for c in entries[:-1]], numbers, "the claims' numbers")
    assert not problem, f"{problem} (claims are numbered 01, 02, ... without a gap)"
    assert [c.stem for c in entries][-1] == "kernels"
    assert registry(judged_only=True) == entries[:-1]


def test_every_judged_claim_names_its_source():
    for claim in registry(judged_only=True):
        assert claim.source and claim.citations, f"{claim.stem}: its CLAIM needs a source and citations (the ledger's)"


@pytest.mark.parametrize("claim", registry(), ids=lambda c: c.stem)
def test_one_name_everywhere(claim):
    """Module, results folder, notebook stem and ledger share the claim's name."""
    module = next(m.name for m in pkgutil.iter_modules(claims.__path__)
                  if importlib.import_module(f"lstmstudy.claims.{m.name}").CLAIM is claim)
    assert module == claim.name or (claim.name, module) == ("kernels", "kernel_benchmark")
    assert (ROOT / "results" / claim.name).is_dir()
    if claim.number:
        assert (ROOT / "notebooks" / f"{claim.stem}.ipynb").exists()
        assert claim.stem == f"{claim.number}_{claim.name}"


@pytest.mark.parametrize("claim", registry(), ids=lambda c: c.stem)
def test_every_default_grid_is_valid_and_slow_kernels_come_last(claim):
    for kind in DEVICE_KINDS:
        assert set(claim.defaults[kind]) == set(claim.defaults["cpu"])
        points = claim.points(kind)
        assert points and claim.points(kind, quick=True)
        slow = [p.kernel in claim.slow for p in points]
        assert slow == sorted(slow), "compiles and masked Keras loops are measured last"


def test_a_gpu_node_measures_every_entry_once_in_the_gpu_order():
    stems = [c.stem for c in registry()]
    problem = differences(GPU_ORDER, [stem for stem in stems if stem in GPU_ORDER], "GPU_ORDER", in_order=False)
    assert not problem and set(GPU_ORDER) <= set(stems), f"{problem} (GPU_ORDER names registered claims, each once)"
    ordered = [c.stem for c in lookup(["gpu-order"])]
    assert ordered == [*GPU_ORDER, *(stem for stem in stems if stem not in GPU_ORDER)]
    assert "--plan lease" in (ROOT / "scripts" / "gpu-node.sh").read_text()


def test_the_lease_plan_measures_every_default_gpu_point_once_the_judged_claims_first():
    steps = claims.lease_plan()
    assert [claim.stem for claim, select in steps if select == "lease"] == list(claims.LEASE_ORDER)
    assert set(claims.LEASE_ORDER) == {c.stem for c in registry(judged_only=True)} & set(GPU_ORDER[:FIRST])
    assert claims.LEASE_ORDER[-2:] == ("02_cpu_vs_gpu_batch", "04_frameworks_vs_baseline")  # 04's CUDA graph last
    planned = {}
    for claim, select in steps:
        for point in claim.points("cuda", select=select):
            planned.setdefault((claim.name, point.key()), []).append(select)
    every = {(c.name, p.key()) for c in registry() for p in c.points("cuda")}
    assert set(planned) == every  # nothing left out, nothing outside the default grids
    # a lease point again in its claim's default grid (the sweep finds it stored), the rest once
    assert all(selects in (["lease", "fast"], ["fast"], ["slow"]) for selects in planned.values())
    order = [select for _, select in steps]
    assert order == sorted(order, key=["lease", "fast", "slow"].index)  # compiles and masked loops last


@pytest.mark.parametrize("stem", claims.LEASE_ORDER)
def test_a_lease_grid_is_part_of_the_default_grid_with_no_slow_point(stem):
    claim = lookup([stem])[0]
    lease = claim.points("cuda", select="lease")
    default = {p.key() for p in claim.points("cuda")}
    assert claim.lease is not None and lease
    assert {p.key() for p in lease} <= default
    assert len(lease) < len(default) or claim.lease.seconds_per_point < claim.seconds_per_point["cuda"]  # cheaper
    assert not any(p.kernel in claim.slow for p in lease)


def test_the_default_gpu_grids_fit_a_lease():
    plan = {c.stem: c.estimate_s("cuda") for c in lookup(["gpu-order"])}
    assert sum(list(plan.values())[:FIRST]) <= FIRST_S, plan
    assert sum(plan.values()) <= ALL_S, plan


def test_the_plan_counts_a_cold_compile_for_each_slow_point():
    claim = lookup(["01"])[0]
    points = claim.points("cuda")
    slow = sum(p.kernel in claim.slow for p in points)
    assert slow and claim.estimate_s("cuda") == pytest.approx(
        (len(points) - slow) * claim.seconds_per_point["cuda"] + slow * claim.seconds_per_slow_point["cuda"])
    assert claim.seconds_per_slow_point["cuda"] >= 30


def test_a_grid_override_is_checked_before_anything_runs():
    claim = lookup(["01"])[0]
    assert claim.parameters("cuda", batches=[1, 8])["batches"] == [1, 8]
    with pytest.raises(ParameterError, match="claim 01_cudnn_fallback has no grid parameter 'hidden'; its parameters"):
        claim.parameters("cpu", hidden=[8])
    with pytest.raises(ParameterError, match="parameter 'batches' must be a non-empty list of positive integers"):
        claim.parameters("cpu", batches=[0])
    with pytest.raises(ParameterError, match="device kind must be one of"):
        claim.parameters("tpu")


def test_claims_are_found_by_number_name_or_stem():
    assert [c.stem for c in lookup(["02", "mixed_precision", "05_bucketing"])] == [
        "02_cpu_vs_gpu_batch", "03_mixed_precision", "05_bucketing"]
    # in the order asked, each once: a GPU lease measures the most telling claims first
    assert [c.stem for c in lookup(["06", "01", "energy", "kernels", "02"])] == [
        "06_energy", "01_cudnn_fallback", "kernels", "02_cpu_vs_gpu_batch"]
    assert lookup(["all"]) == lookup(None) == registry()
    assert [c.stem for c in lookup(["kernels"])] == ["kernels"]
    with pytest.raises(ParameterError, match="unknown claim '99'"):
        lookup(["99"])


def test_without_tensorflow_keras_gets_the_torch_backend(monkeypatch):
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.delenv("LSTMSTUDY_KERAS_BACKEND_CHOSEN", raising=False)
    monkeypatch.setattr(backends, "importable", lambda name: name != "tensorflow")
    assert backends.choose_keras_backend() is True
    assert backends.os.environ["KERAS_BACKEND"] == "torch" and backends.chosen_note() == backends.CHOSEN_NOTE


@pytest.mark.parametrize(("preset", "tensorflow"), [("jax", False), (None, True)])
def test_a_backend_the_user_set_or_tensorflow_keeps_keras_as_it_is(monkeypatch, preset, tensorflow):
    monkeypatch.delenv("LSTMSTUDY_KERAS_BACKEND_CHOSEN", raising=False)
    if preset:
        monkeypatch.setenv("KERAS_BACKEND", preset)
    else:
        monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setattr(backends, "importable", lambda name: tensorflow or name != "tensorflow")
    assert backends.choose_keras_backend() is False
    assert backends.os.environ.get("KERAS_BACKEND") == preset and backends.chosen_note() is None


@pytest.mark.parametrize("parts, expected", [
    (["reproduced", "reproduced"], "reproduced"),
    (["not reproduced", "not reproduced"], "not reproduced"),
    (["reproduced", "not reproduced"], "partly"),
    (["reproduced", "not reproduced", "inconclusive"], "partly"),  # no undecided part can change it
    (["reproduced", "inconclusive"], "inconclusive"),
    (["not reproduced", "inconclusive"], "inconclusive"),
    (["reproduced", "not measured on this hardware"], "not measured on this hardware"),  # never half a rule
    ([], "not measured on this hardware"),
])
def test_combine_parts(parts, expected):
    undecided = frozenset({Outcome.REPRODUCED, Outcome.NOT_REPRODUCED})
    as_sets = [undecided if p == "inconclusive" else frozenset({Outcome(p)}) for p in parts]
    assert settle(combine(as_sets)) == Outcome(expected)


def test_a_part_the_rule_does_not_know_is_an_error():
    with pytest.raises(ValueError, match="hold, fail or hold partly"):
        combine([frozenset({Outcome.EXCEEDS}), frozenset({Outcome.REPRODUCED})])


def test_an_undecided_part_that_cannot_change_the_outcome_is_decided():
    partly_or_reproduced = frozenset({Outcome.REPRODUCED, Outcome.PARTLY})
    assert settle(combine([partly_or_reproduced, frozenset({Outcome.NOT_REPRODUCED})])) == Outcome.PARTLY
    assert settle(combine([partly_or_reproduced, frozenset({Outcome.REPRODUCED})])) == Outcome.INCONCLUSIVE


def test_parts_decide_on_intervals():
    assert holds_from(1.1).decide(1.2, 1.5) == Outcome.REPRODUCED
    assert holds_from(1.1).decide(0.9, 1.05) == Outcome.NOT_REPRODUCED
    assert holds_from(1.1).decide(1.0, 1.2) == Outcome.INCONCLUSIVE
    assert holds_below(1.05).decide(0.9, 1.0) == Outcome.REPRODUCED
    assert holds_below(1.05).decide(1.1, 1.3) == Outcome.NOT_REPRODUCED


R, N, U = Outcome.REPRODUCED, Outcome.NOT_REPRODUCED, frozenset({Outcome.REPRODUCED, Outcome.NOT_REPRODUCED})


@pytest.mark.parametrize("small, large, expected", [
    (R, R, R),   # the small side wins small, the large side wins large: the crossover
    (R, N, Outcome.PARTLY),  # the small side faster at both ends: its half of the claim holds
    (N, R, N),   # the large side faster at both ends: no crossover at all (claims 2 and 4 alike)
    (N, N, N),   # the reverse
])
def test_a_crossover_claim_with_the_large_side_winning_everywhere_is_not_reproduced(small, large, expected):
    assert crossover(small, large) == expected
    assert settle(crossover_possible(frozenset({small}), frozenset({large}))) == expected


def test_an_undecided_crossover_part_is_inconclusive_only_where_it_matters():
    assert settle(crossover_possible(frozenset({N}), U)) == N  # either way no crossover
    assert settle(crossover_possible(frozenset({R}), U)) == Outcome.INCONCLUSIVE
    assert settle(crossover_possible(frozenset({Outcome.NOT_MEASURED}), U)) == Outcome.NOT_MEASURED


def _timed_rows(hardware_id: str, rounds: list[int]) -> list[dict]:
    """Two ok rows (fallback 3x the fused kernel) whose samples come in `rounds` (empty: one burst)."""
    from lstmstudy.claims import cudnn_fallback

    out = []
    for kernel, ms in (("torch.fused", 1.0), ("torch.native", 3.0)):
        samples = [ms / 1e3] * (sum(rounds) or 6)
        out.append({"claim": cudnn_fallback.NAME, "hardware_id": hardware_id, "device_kind": "cpu", "kernel": kernel,
                    "phase": "train", "precision": "fp32", "batch": 1, "timesteps": 8, "features": 8,
                    "hidden": 8, "layers": 1, "bidirectional": False, "config": "{}", "status": "ok", "error": "",
                    "samples": samples, "median_s": ms / 1e3, "round_sizes": rounds,
                    "round_seed": 1 if rounds else None,
                    "observed_kernel": "onednn", "predicted_kernel": ""})
    return out


def test_a_set_timed_in_one_burst_per_row_gets_no_verdict():
    import pandas as pd

    from lstmstudy.claims import cudnn_fallback

    data = pd.DataFrame(_timed_rows("cpu-rounds-2t", [3, 3]) + _timed_rows("cpu-burst-2t", []))
    assert one_burst_sets(data) == {"cpu-burst-2t"}
    # the edge: one round is one burst, two rounds are not
    assert one_burst_sets(pd.DataFrame(_timed_rows("cpu-a-2t", [6]) + _timed_rows("cpu-b-2t", [5, 1]))) == {"cpu-a-2t"}
    judged = {v.hardware_id: v for v in cudnn_fallback.CLAIM.judge(data)}
    plain = {v.hardware_id: v for v in cudnn_fallback.CLAIM.verdicts(data)}
    assert judged["cpu-rounds-2t"] == plain["cpu-rounds-2t"] and plain["cpu-burst-2t"].outcome == Outcome.REPRODUCED
    burst = judged["cpu-burst-2t"]
    assert burst.outcome == Outcome.NOT_ASSESSED and not burst.counts and "noise not assessed" in burst.ours_text
    assert burst.ours == plain["cpu-burst-2t"].ours  # the figure stays on the page; only the verdict goes


def test_the_lease_measures_the_five_judged_claims_within_one_call():
    """Planned from each claim's seconds per point (what the first lease measured, rounded up): the smoke check,
    first use, the five lease grids and packing fit one call with a quarter of it to spare, and the measuring fits
    0.7 of the deadline gpu-node.sh leaves it after the check (20 s kept for packing, 15 s more between the
    deadline and the backstop), so a slower GPU than the H100 they were measured on still finishes them."""
    lease = sum(seconds for _, select, _, seconds in claims.planned(claims.lease_plan(), "cuda") if select == "lease")
    fixed = claims.LEASE_FIXED_S
    assert sum(fixed.values()) + lease <= 0.75 * claims.LEASE_CALL_S
    first_use = fixed["first use of CUDA, cuDNN and Keras"]
    deadline = claims.LEASE_CALL_S - (sum(fixed.values()) - first_use) - 15  # what measuring has after the rest
    assert first_use + lease <= 0.7 * deadline


def test_the_lease_keeps_what_the_verdicts_read():
    def cut(stem):
        claim = lookup([stem])[0]
        return claim.points("cuda"), claim.points("cuda", select="lease")

    # 02: PyTorch's models, one kernel family on both devices (Keras on torch, a node's, runs two), at both ends
    default, lease = cut("02")
    ends = {min(p.shape.batch for p in default), max(p.shape.batch for p in default)}
    read = {(p.kernel, p.shape.batch) for p in default if p.kernel.startswith("torch.") and p.shape.batch in ends}
    assert len(read) == 4 and {(p.kernel, p.shape.batch) for p in lease} >= read
    default, lease = cut("03")  # the AMP step's fp16 over fp32, inference, at the smallest and the largest shape
    headline = [p.shape for p in default if p.kernel == "torch.fused" and p.phase == "inference"]
    ends = {min(headline, key=lambda s: s.flops()), max(headline, key=lambda s: s.flops())}
    read = {(s, "fp32", "{}") for s in ends} | {(s, "fp16", config_text(AUTOCAST)) for s in ends}
    assert {(p.shape, p.precision, config_text(p.config)) for p in lease if p.phase == "inference"} >= read
    # 04: queued torch.fused and the loop baseline at every fp32 shape (a GPU decides on queued rows alone), and
    # the profiler's rows of the overhead split
    default, lease = cut("04")
    read = {p.key() for p in default if p.precision == "fp32" and (p.config == QUEUED and p.kernel in {"torch.fused", LOOP}
                                                                    or p.config == IN_KERNEL)}
    assert len(read) >= 28 and read <= {p.key() for p in lease}


@pytest.mark.parametrize(("rounds", "fewest"), [
    ([[1] * 5], 5), ([[1] * 6, [10] * 5], 6), ([[1] * 7], None), ([[3] * 5], None), ([[]], None), ([None], None),
    ([[], [1] * 5], 5)])  # a row timed in one burst records no rounds: it neither hides nor makes low precision
def test_a_row_of_fewer_than_seven_timings_is_low_precision(rounds, fewest):
    from lstmstudy.rules import fewest_timings

    assert fewest_timings(*rounds) == fewest
