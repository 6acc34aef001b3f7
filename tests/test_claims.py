"""The claim contract: one list of claims, one name each, default grids per device kind that fit a GPU lease."""

from __future__ import annotations

from pathlib import Path

import pytest

from lstmstudy import backends
from lstmstudy.claims import DEVICE_KINDS, MODULES, Outcome, combine, holds_below, holds_from, lookup, registry, settle
from lstmstudy.errors import ParameterError

ROOT = Path(__file__).resolve().parent.parent
#: the measuring a GPU node's first calls give the five judged claims, measured first in this order
#: (scripts/gpu-node.sh), and what all of it, the kernel benchmark included, may take in the calls of one lease
JUDGED_FIRST, JUDGED_S, ALL_S = ("06", "01", "03", "04", "02"), 15 * 60, 26 * 60


def test_the_registry_lists_the_claims_in_order_then_the_kernel_benchmark():
    entries = registry()
    assert [c.number for c in entries] == ["01", "02", "03", "04", "05", "06", "07", ""]
    assert [c.stem for c in entries][-1] == "kernels"
    assert registry(judged_only=True) == entries[:-1]


@pytest.mark.parametrize("claim", registry(), ids=lambda c: c.stem)
def test_one_name_everywhere(claim):
    """Module, results folder, notebook stem and ledger share the claim's name."""
    module = MODULES[[c.name for c in registry()].index(claim.name)]
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


def test_the_default_gpu_grids_fit_a_lease():
    plan = {c.number: c.estimate_s("cuda") for c in registry()}
    assert sum(plan[n] for n in JUDGED_FIRST) <= JUDGED_S, plan
    assert sum(plan.values()) <= ALL_S, plan
    script = (ROOT / "scripts" / "gpu-node.sh").read_text()
    assert "--claims " + " ".join(JUDGED_FIRST) in script


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
    monkeypatch.setattr(backends, "_importable", lambda name: name != "tensorflow")
    assert backends.choose_keras_backend() is True
    assert backends.os.environ["KERAS_BACKEND"] == "torch" and backends.chosen_note() == backends.CHOSEN_NOTE


@pytest.mark.parametrize(("preset", "tensorflow"), [("jax", False), (None, True)])
def test_a_backend_the_user_set_or_tensorflow_keeps_keras_as_it_is(monkeypatch, preset, tensorflow):
    monkeypatch.delenv("LSTMSTUDY_KERAS_BACKEND_CHOSEN", raising=False)
    if preset:
        monkeypatch.setenv("KERAS_BACKEND", preset)
    else:
        monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setattr(backends, "_importable", lambda name: tensorflow or name != "tensorflow")
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
