"""Claim 5's verdicts and its time-follows-work statistic on injected result sets, its grid on both corpora, the
worked example as a check, and real measurements at tiny sizes (the quick path, and whole epochs)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from lstmstudy import contract, data, kernels, results, sweep
from lstmstudy.claims import bucketing as claim
from lstmstudy.errors import ParameterError
from lstmstudy.hardware import Fingerprint
from lstmstudy.rules import ONE_BURST_WORDS, Outcome
from lstmstudy.timing import Measurement
from tests.measuring import QUICK, measure_one

CPU = Fingerprint(device_kind="cpu", cpu_model="Test CPU 9000", cpu_flags=[], physical_cores=2, threads=2, ram_gb=8.0)
GPU = Fingerprint(device_kind="cuda", cpu_model="Test CPU 9000", cpu_flags=[], physical_cores=2, threads=2, ram_gb=8.0,
                  gpu_name="Test GPU")
#: a small model for every test; the corpus and the timing come from SYNTHETIC or REAL
MODEL = dict(layers=1, hidden=16, features=4)
#: the synthetic corpus, an epoch estimated from 3 sampled batches (as the result sets before the real lengths)
SYNTHETIC = dict(batch_size=8, corpus=400, sample_batches=3, **MODEL)
#: the real valid split, every batch of an epoch timed (14 batches of 256)
REAL = dict(batch_size=256, corpus="ptb-valid", sample_batches="all", **MODEL)
SPREAD = (-1.0, -0.5, 0.0, 0.5, 1.0)
PAGE = Path(__file__).resolve().parent.parent / "book" / "claims" / f"{claim.CLAIM.stem}.ipynb"
#: the samples in two rounds, as interleaved timing stores them (a row of one round is a burst: no reading)
ROUNDS = (2, 3)


def _points(sizes: dict, kernels=claim.KERNELS, kind: str = "cpu"):
    """The full (not quick) grid at `sizes`, the other parameters at the claim's defaults for `kind`."""
    return claim.grid(kind=kind, quick=False, **claim.CLAIM.parameters(kind, **sizes, kernels=list(kernels)))


def _store(root, fp, per_batch_s: dict[tuple[str, str], float], sizes: dict = SYNTHETIC, spread: float = 0.01,
           rounds: tuple[int, ...] = (), seed: int | None = None, samples_of=None):
    """One stored row per (kernel, plan): every timed call takes per-batch seconds x the batches it trains, in
    `rounds` (none: one burst per row), interleaved where `seed` is given; `samples_of(plan, call)` replaces the
    samples."""
    device = torch.device(fp.device_kind)
    rows = []
    for point in _points(sizes):
        key = (point.kernel, point.config["plan"])
        if key not in per_batch_s:
            continue
        call = per_batch_s[key] * point.config["sample_batches"]
        samples = (tuple(call * (1 + spread * d) for d in SPREAD) if samples_of is None
                   else samples_of(point.config["plan"], call))
        outcome = contract.PointResult(measurement=Measurement(samples=samples, warmup=1, threads=2, sync="none",
                                                                   round_sizes=rounds, seed=seed))
        rows.append(sweep.make_row(claim.NAME, point, device, fp, outcome=outcome))
    results.append(claim.NAME, fp.hardware_id, rows, root)


def _epochs(per_batch_s: float, auto_s: float, global_s: float = 2.0, kernel: str = claim.HEADLINE):
    """Per-batch seconds of every plan for `kernel`: per-batch padding (the verdict's baseline), auto buckets and
    padding to the global maximum (context) as given."""
    times = {plan: 0.4 for plan in claim.PLAN_NAMES}
    times.update({claim.GLOBAL_MAX: global_s, claim.PER_BATCH: per_batch_s, claim.AUTO: auto_s})
    return {(kernel, plan): t for plan, t in times.items()}


def _real_plans():
    return data.plans(REAL["corpus"], REAL["batch_size"])


def work_ratio() -> float:
    """Per-batch padding's padded steps over auto buckets' on the real corpus: the speed-up time / work = 1 gives."""
    plan_set = _real_plans()
    return plan_set[claim.PER_BATCH].padded_steps / plan_set[claim.AUTO].padded_steps


def _speedup_for(ratio: float) -> float:
    """The auto buckets' per-batch seconds that make their epoch `ratio` x faster than per-batch padding (at 1 s)."""
    plan_set = _real_plans()
    return plan_set[claim.PER_BATCH].n_batches / plan_set[claim.AUTO].n_batches / ratio


def _verdict(tmp_path, per_batch_s, sizes=REAL, spread=0.01):
    _store(tmp_path, CPU, per_batch_s, sizes, spread)
    (verdict,) = claim.verdicts(results.load(claim.NAME, tmp_path))
    return verdict


# --- the worked example: a check, not a verdict -----------------------------------------------------------

def test_worked_example_is_an_exact_check_not_a_verdict(tmp_path):
    table = claim.worked_example_table()
    assert list(table.steps) == list(table.slides) == [22, 30, 24] and table.matches.all()
    assert claim.worked_example_matches()
    assert not claim.worked_example_matches({**data.worked_example(), "padded": 31})
    _store(tmp_path, CPU, _epochs(1.0, _speedup_for(3.3)), REAL)
    assert [v.statement for v in claim.verdicts(results.load(claim.NAME, tmp_path))] == [claim.STATEMENT]


# --- the verdict ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("speedup", "spread", "expected"), [
    (3.3, 0.01, Outcome.REPRODUCED), (2.3, 0.01, Outcome.REPRODUCED), (4.8, 0.01, Outcome.REPRODUCED),
    (5.2, 0.01, Outcome.EXCEEDS), (2.1, 0.01, Outcome.PARTLY), (1.55, 0.01, Outcome.PARTLY),
    (1.4, 0.01, Outcome.NOT_REPRODUCED),
    (2.2, 0.05, Outcome.INCONCLUSIVE),  # the interval straddles the 2.2x edge
    (4.95, 0.05, Outcome.INCONCLUSIVE),  # and the 4.95x one
])
def test_verdict_bands_on_the_whole_epoch_speedup(tmp_path, speedup, spread, expected):
    verdict = _verdict(tmp_path, _epochs(1.0, _speedup_for(speedup)), spread=spread)
    assert verdict.hardware_id == CPU.hardware_id and verdict.outcome == expected
    assert verdict.ours == pytest.approx(speedup, rel=1e-9)
    assert verdict.low <= verdict.ours <= verdict.high
    assert "whole epochs" in verdict.ours_text and "Penn Treebank valid" in verdict.ours_text
    assert "over per-batch padding" in verdict.ours_text and "time / work" in verdict.ours_text
    assert "context, not deciding" in verdict.ours_text and "over padding to the corpus maximum" in verdict.ours_text


def test_the_bands_are_symmetric_around_the_seed_on_a_log_scale():
    low, reproduced_low, reproduced_high = claim.BANDS.edges
    assert reproduced_low * reproduced_high == pytest.approx(claim.SEED_SPEEDUP**2)
    assert reproduced_low / low == pytest.approx(claim.SEED_SPEEDUP / reproduced_low)


def test_per_batch_padding_decides_and_the_corpus_maximum_does_not(tmp_path):
    # 3.3x over the corpus maximum, 1.2x over per-batch padding: the slides' own baseline decides
    plan_set, auto_s = _real_plans(), _speedup_for(1.2)
    global_s = 3.3 * auto_s * plan_set[claim.AUTO].n_batches / plan_set[claim.GLOBAL_MAX].n_batches
    verdict = _verdict(tmp_path, _epochs(1.0, auto_s, global_s=global_s))
    assert verdict.outcome == Outcome.NOT_REPRODUCED and verdict.ours == pytest.approx(1.2)
    assert "3.30x" in verdict.ours_text.split("context, not deciding")[1]


@pytest.mark.parametrize("sizes", [SYNTHETIC, {**REAL, "sample_batches": 3}], ids=["synthetic", "sampled"])
def test_a_sampled_or_synthetic_epoch_decides_nothing_but_says_what_it_found(tmp_path, sizes):
    verdict = _verdict(tmp_path, _epochs(1.0, 0.3), sizes)
    assert verdict.outcome == Outcome.NOT_MEASURED and verdict.ours is None
    assert "no whole-epoch timing on the real Penn Treebank lengths" in verdict.ours_text
    assert "sampling error is not in it" in verdict.ours_text and "sampled batches per epoch" in verdict.ours_text


def test_the_real_whole_epoch_setting_decides_beside_a_stored_synthetic_one(tmp_path):
    _store(tmp_path, CPU, _epochs(1.0, 0.9), SYNTHETIC)  # would be "not reproduced"
    verdict = _verdict(tmp_path, _epochs(1.0, _speedup_for(3.3)))
    assert verdict.outcome == Outcome.REPRODUCED and verdict.ours == pytest.approx(3.3)
    epochs = claim.largest_settings(claim.epoch_times(results.load(claim.NAME, tmp_path)))
    assert set(epochs.timed) == {"whole epochs"} and epochs.real_corpus.all()


def test_only_the_headline_kernel_decides(tmp_path):
    # packed and masked look spectacular, torch.padded is missing: the set is not measured, not reproduced
    times = {**_epochs(1.0, 0.1, kernel="torch.packed"), **_epochs(1.0, 0.1, kernel="keras.masked")}
    verdict = _verdict(tmp_path, times)
    assert verdict.outcome == Outcome.NOT_MEASURED and verdict.ours is None


def test_missing_baseline_is_not_measured(tmp_path):
    times = _epochs(1.0, 0.2)
    del times[(claim.HEADLINE, claim.PER_BATCH)]
    assert _verdict(tmp_path, times).outcome == Outcome.NOT_MEASURED


def test_hardware_sets_get_their_own_verdicts(tmp_path):
    _store(tmp_path, CPU, _epochs(1.0, _speedup_for(1.2)), REAL)
    _store(tmp_path, GPU, _epochs(1.0, _speedup_for(3.3)), REAL)
    got = {v.hardware_id: v.outcome for v in claim.verdicts(results.load(claim.NAME, tmp_path))}
    assert got == {CPU.hardware_id: Outcome.NOT_REPRODUCED, GPU.hardware_id: Outcome.REPRODUCED}


# --- time follows padded work -------------------------------------------------------------------------------

@pytest.mark.parametrize(("tracking", "spread", "expected"), [
    (1.0, 0.01, "tracks"), (0.65, 0.01, claim.TRACKING_READINGS[1]), (0.3, 0.01, claim.TRACKING_READINGS[0]),
    (1.5, 0.01, claim.TRACKING_READINGS[3]), (0.8, 0.05, claim.UNDECIDED),
])
def test_time_follows_padded_work_is_read_on_its_interval(tmp_path, tracking, spread, expected):
    work = work_ratio()
    _store(tmp_path, CPU, _epochs(1.0, _speedup_for(work * tracking)), REAL, spread, ROUNDS)
    frame = results.load(claim.NAME, tmp_path)
    (read,) = claim.tracking(frame).itertuples(index=False)
    assert read.reading == expected and read.hardware == CPU.hardware_id
    assert read[1] == pytest.approx(tracking, rel=1e-9) and read.low <= read[1] <= read.high
    (verdict,) = claim.verdicts(frame)
    assert read[1] == pytest.approx(verdict.ours / work) and read.low == pytest.approx(verdict.low / work)


def test_time_follows_padded_work_is_no_seeds_claim_and_never_says_an_outcome(tmp_path):
    """No seed claims that time tracks padded work: its page words are its own, never a seed's outcome's."""
    outcomes = {o.value for o in Outcome}
    assert not outcomes & {*claim.TRACKING_READINGS, claim.UNDECIDED, claim.NO_READING}
    assert "reproduced" not in claim.TRACKING_RULE and "exceeds" not in claim.TRACKING_RULE
    _store(tmp_path, CPU, _epochs(1.0, _speedup_for(1.0 * work_ratio())), REAL, rounds=ROUNDS)
    _store(tmp_path, GPU, _epochs(1.0, 0.4), SYNTHETIC, rounds=ROUNDS)  # sampled epochs: no reading
    texts = claim.tracking_texts(claim.tracking(results.load(claim.NAME, tmp_path)))
    assert texts["cpu"].startswith(f"On {CPU.hardware_id}: time / work ") and texts["cpu"].endswith(": tracks.")
    assert texts["cuda"].startswith(f"On {GPU.hardware_id}: no verdict: no whole-epoch timing")
    assert texts["cuda"].endswith(f": {claim.NO_READING}.")
    assert not any(re.search(r"\b(reproduced|partly|exceeds|inconclusive)\b", text) for text in texts.values())
    assert claim.tracking_texts(claim.tracking(results.load(claim.NAME, tmp_path / "none"))) == {
        "cpu": "No CPU result set is stored.", "cuda": "No GPU result set is stored."}


def test_a_set_timed_in_one_burst_gets_no_reading(tmp_path):
    _store(tmp_path, CPU, _epochs(1.0, _speedup_for(1.5)), REAL)  # one round per row: a burst
    frame = results.load(claim.NAME, tmp_path)
    (read,) = claim.tracking(frame).itertuples(index=False)
    assert read.reading == claim.NO_READING and ONE_BURST_WORDS in read[-1] and read.low <= read[1] <= read.high


def test_the_page_reads_time_against_work_in_its_own_words():
    """The page glues `tracking_texts` and explains its readings, never a seed's outcome; and what it says of the
    kernels that compute every padded step stays true whatever a set measured (on an H100 time did not track)."""
    cells = json.loads(PAGE.read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    markdown = " ".join(" ".join("".join(c["source"]).split()) for c in cells if c["cell_type"] == "markdown")
    assert "claim.tracking_texts(" in code and "tracking_verdicts" not in code
    explained = markdown[markdown.index("{glue:text}`c05_tracking_cuda`"):markdown.index("## Verdict")]
    assert "*Tracks*" in explained and not re.search(r"(?i)reproduced|partly|exceeds", explained)
    assert "the ledger does not count it" not in markdown and "roughly in proportion to the padded work" not in markdown


def test_speedups_cover_every_plan_over_both_baselines(tmp_path):
    _store(tmp_path, CPU, {(claim.HEADLINE, plan): 0.1 for plan in claim.PLAN_NAMES}, REAL)
    gains = claim.speedups(results.load(claim.NAME, tmp_path))
    for baseline in claim.BASELINES:
        assert set(gains[gains.baseline == baseline].plan) == set(claim.PLAN_NAMES) - {baseline}
    plan_set = _real_plans()
    for row in gains.itertuples():
        base, plan = plan_set[row.baseline], plan_set[row.plan]
        assert row.ratio == pytest.approx(base.n_batches / plan.n_batches)  # equal per-batch times
        assert row.work_ratio == pytest.approx(base.padded_steps / plan.padded_steps)
        assert row.tracking == pytest.approx(row.ratio / row.work_ratio)
        assert row.ratio_lo <= row.ratio <= row.ratio_hi and not row.paired  # the injected rows share no rounds
    summary = claim.speedup_summary(gains)
    assert {f"{w} over {b}" for b in claim.BASELINES for w in ("speed-up", "work", "time / work")} <= set(summary)


# --- epoch times and the timing sample -----------------------------------------------------------------------

def test_epoch_times_scale_a_sample_to_the_plan(tmp_path):
    points = {p.config["plan"]: p for p in _points(SYNTHETIC, [claim.HEADLINE])}
    _store(tmp_path, CPU, {(claim.HEADLINE, plan): 0.1 for plan in claim.PLAN_NAMES})
    epochs = claim.epoch_times(results.load(claim.NAME, tmp_path)).set_index("plan")
    for plan, point in points.items():
        config = point.config
        assert epochs.epoch_s[plan] == pytest.approx(0.1 * config["epoch_batches"])
        assert epochs.epoch_lo_s[plan] <= epochs.epoch_s[plan] <= epochs.epoch_hi_s[plan]
        assert epochs.ms_per_batch[plan] == pytest.approx(100.0)
        assert epochs.sample_work_error[plan] == pytest.approx(
            config["sample_padded_steps"] * config["epoch_batches"] / config["sample_batches"]
            / config["epoch_padded_steps"] - 1)
    assert set(epochs.timed) == {"3 sampled batches per epoch"}
    assert set(epochs.corpus) == {"synthetic PTB-like, 400 sentences"}


def test_timing_sample_is_a_stratified_subplan():
    plan = data.plans(2000, 16)[claim.PER_BATCH]
    sample = data.timing_sample(plan, 8)
    assert sample.n_batches == 8
    assert all(w in plan.widths for w in sample.widths)
    # each sampled batch stands for an eighth of the plan: the estimate of the padded work is close
    estimate = sample.padded_steps * plan.n_batches / sample.n_batches
    assert estimate == pytest.approx(plan.padded_steps, rel=0.1)
    assert data.timing_sample(plan, plan.n_batches) is plan and data.timing_sample(plan, plan.n_batches + 5) is plan


def test_global_max_keeps_its_width_in_the_sample():
    plan = data.plans(500, 8)[claim.GLOBAL_MAX]
    sample = data.timing_sample(plan, 4)
    assert set(sample.widths) == {int(max(plan.lengths))}


# --- the grid and its parameters ------------------------------------------------------------------------------

@pytest.mark.parametrize("sizes", [SYNTHETIC, REAL], ids=["synthetic", "real"])
def test_grid_covers_every_plan_and_kernel(sizes):
    points = _points(sizes)
    assert len(points) == len(data.PLANS) * len(claim.KERNELS)
    assert {p.phase for p in points} == {"train"} and {p.shape.layers for p in points} == {1}
    plan_set = data.plans(sizes["corpus"], sizes["batch_size"])
    assert {p.shape.timesteps for p in points} == {max(plan_set[claim.GLOBAL_MAX].lengths)}
    for point in points:
        plan = plan_set[point.config["plan"]]
        assert point.config["epoch_batches"] == plan.n_batches
        assert point.config["epoch_padded_steps"] == plan.padded_steps
        assert point.config["corpus"] == sizes["corpus"]
    if sizes["sample_batches"] == claim.WHOLE_EPOCH:
        assert all(p.config["sample_batches"] == p.config["epoch_batches"] for p in points)
        assert all(data.sample_for(dict(p.config)) is plan_set[p.config["plan"]] for p in points)


def test_default_grids_by_device_kind():
    cpu, cuda = claim.CLAIM.defaults["cpu"], claim.CLAIM.defaults["cuda"]
    assert (cuda["layers"], cuda["corpus"]) == (claim.SEED_LAYERS, "ptb-valid")  # the page's arithmetic's corpus
    # one layer of 64 units on the valid split: whole epochs of 8 layers on both splits take far too long on 2 cores
    assert (cpu["layers"], cpu["hidden"], cpu["corpus"]) == (1, 64, "ptb-valid") and cuda["hidden"] == 128
    assert cpu["sample_batches"] == cuda["sample_batches"] == claim.WHOLE_EPOCH
    # the torch steps on a GPU: a GPU node runs Keras on its torch backend, where a masked LSTM is a Python loop
    # (minutes per 8-layer epoch); on a small CPU the step the verdict reads alone
    assert cuda["kernels"] == ["torch.padded", "torch.packed"] and cpu["kernels"] == [claim.HEADLINE]
    assert {k: v for k, v in cuda.items() if k not in ("layers", "hidden", "corpus", "kernels")} == \
        {k: v for k, v in cpu.items() if k not in ("layers", "hidden", "corpus", "kernels")}
    assert {p.shape.layers for p in claim.CLAIM.points("cuda", **{**REAL, "layers": 3})} == {3}
    # quick shrinks every size to a smoke run: a sample of 2 batches of a one-layer model, the real corpus kept
    quick = claim.CLAIM.points("cpu", quick=True)
    assert {p.shape.layers for p in quick} == {1} and {p.shape.batch for p in quick} == {8}
    assert {p.config["sample_batches"] for p in quick} == {2} and {p.config["corpus"] for p in quick} == {"ptb-valid"}
    assert {p.config["corpus"] for p in claim.CLAIM.points("cpu", quick=True, corpus=42068)} == {2000}


@pytest.mark.parametrize("bad", [dict(kernels=["torch.fused"]), dict(layers=-1), dict(layers=True),
                                 dict(layers=0), dict(corpus="ptb-train"), dict(corpus=0), dict(corpus=True),
                                 dict(sample_batches="some"), dict(sample_batches=0),
                                 dict(static_boundaries=[20, 10]), dict(static_boundaries=[]),
                                 dict(static_pad_to="bucket"),
                                 dict(corpus_size=100),  # the old grid's name for a synthetic corpus is refused
                                 dict(boundaries=[10, 20])])
def test_bad_parameters_name_themselves(bad):
    name = next(iter(bad))
    with pytest.raises(ParameterError, match=f"'{name}'"):
        claim.CLAIM.parameters("cpu", **bad)


def test_good_parameters_pass_and_override_the_defaults():
    params = claim.CLAIM.parameters("cpu", static_boundaries=[10, 20], static_pad_to="boundary", layers=3,
                                    corpus=5000, sample_batches=4)
    assert params["static_boundaries"] == [10, 20] and params["layers"] == 3 and params["corpus"] == 5000
    assert params["kernels"] == [claim.HEADLINE]
    assert claim.CLAIM.parameters("cpu", kernels=list(claim.KERNELS))["kernels"] == list(claim.KERNELS)
    static = [p for p in claim.grid(kind="cpu", quick=True, **params) if p.config["plan"] == "static_buckets"]
    assert static and all(p.config["boundaries"] == [10, 20] for p in static)


def test_waste_table_has_every_plan_and_both_work_ratios():
    table = claim.waste_table(_real_plans()).set_index("plan")
    assert list(table.index) == list(data.PLANS) and table.how.str.len().min() > 0
    assert table[f"work_ratio_vs_{claim.GLOBAL_MAX}"][claim.GLOBAL_MAX] == 1.0
    assert table[f"work_ratio_vs_{claim.PER_BATCH}"][claim.AUTO] > 1.5
    corpora = claim.corpus_table(["ptb-valid+test", 1000]).set_index("corpus")
    assert list(corpora.sentences) == [7131, 1000] and corpora.tokens.iloc[0] == 149059


def test_on_a_gpu_each_kernel_is_a_group_of_every_plan(tmp_path, monkeypatch):
    """The GPU grid's 12 epochs share one shape: one sweep would make them one group of about 150 s that no
    deadline can stop inside. `measure` sweeps each kernel apart, so the deadline can stop between kernels,
    and each group still holds every plan of its kernel: the ratios `speedups` forms stay within rounds."""
    points = claim.CLAIM.points("cuda")
    swept = []

    def run(name, mine, prepare, plan, *, slow, **options):
        swept.extend(sweep.groups(mine, slow))
        return sweep.SweepReport(claim=name, path=tmp_path / "set.csv", measured=len(mine), already_stored=1)

    monkeypatch.setattr(sweep, "run", run)
    (report,) = claim.measure(points, device="cuda", min_time=0.1, slow=claim.CLAIM.slow)
    assert [{p.kernel for p in group} for group in swept] == [{kernel} for kernel in claim.TORCH_KERNELS]
    assert all(sorted(p.config["plan"] for p in group) == sorted(data.PLANS) for group in swept)
    assert (report.claim, report.measured, report.already_stored) == (claim.NAME, len(points), len(swept))


def test_no_point_to_measure_is_a_report_of_nothing(tmp_path, monkeypatch):
    """A grid with no bucketing point (the first GPU lease met it after the deadline: IndexError) is one
    report that measured nothing, as every other claim gives."""
    def run(name, mine, prepare, plan, **options):
        return sweep.SweepReport(claim=name, path=tmp_path / "set.csv", measured=len(mine))

    monkeypatch.setattr(sweep, "run", run)
    (report,) = claim.measure([], device="cuda", min_time=0.1)
    assert (report.claim, report.measured) == (claim.NAME, 0)


# --- real measurements at tiny sizes ---------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", ["torch.padded", "torch.packed"])
def test_torch_steps_train_and_report_their_kernel(kernel):
    point = next(p for p in _points(SYNTHETIC, [kernel]) if p.config["plan"] == claim.PER_BATCH)
    outcome = measure_one(point)
    assert outcome.measurement.n >= 1 and outcome.measurement.median > 0
    onednn = torch.backends.mkldnn.is_available()
    expected = {"torch.padded": "onednn", "torch.packed": "aten-loop"}[kernel] if onednn else "aten-loop"
    assert outcome.observed.kernel == expected
    assert outcome.flops and np.isfinite(outcome.flops)


def test_a_quick_measurement_stores_every_plan_and_decides_nothing(tmp_path):
    """`lstmstudy measure --claims 05 --device cpu --quick`, its torch kernels: a smoke run of the real corpus."""
    kernels = ["torch.padded", "torch.packed"]
    (report,) = claim.CLAIM.run("cpu", quick=True, root=tmp_path, progress=False, kernels=kernels)
    assert (report.measured, report.errors) == (len(data.PLANS) * 2, 0)
    frame = results.load(claim.NAME, tmp_path)
    # a group per kernel (`measure`): every plan of a kernel in the same rounds, so each ratio is paired
    assert frame.groupby("kernel").round_seed.nunique().eq(1).all() and frame.round_seed.nunique() == 2
    assert claim.speedups(frame).paired.all()
    epochs = claim.epoch_times(frame)
    assert set(epochs.plan) == set(data.PLANS) and set(epochs.timed) == {"2 sampled batches per epoch"}
    (verdict,) = claim.verdicts(frame)
    assert verdict.outcome == Outcome.NOT_MEASURED and "no whole-epoch timing" in verdict.ours_text


def test_whole_epochs_measured_for_real_are_paired_and_decide(tmp_path):
    """Every batch of the valid split (7 batches of 512) with a tiny model, one call per round: the verdict's path."""
    points = claim.grid(kind="cpu", quick=False, **claim.CLAIM.parameters(
        "cpu", kernels=[claim.HEADLINE], batch_size=512, layers=1, hidden=4, features=2))
    one_call = replace(QUICK, burst_warmup=0, burst_min_samples=1)
    sweep.run(claim.NAME, points, kernels.prepare, one_call, device="cpu", root=tmp_path, progress=False)
    frame = results.load(claim.NAME, tmp_path)
    gains = claim.speedups(frame)
    assert len(gains) == 2 * (len(data.PLANS) - 1) and gains.paired.all()  # one group: timed in the same rounds
    assert set(claim.epoch_times(frame).timed) == {"whole epochs"}
    (verdict,) = claim.verdicts(frame)
    assert verdict.outcome != Outcome.NOT_MEASURED and verdict.low <= verdict.ours <= verdict.high


@pytest.mark.parametrize(("rounds", "expected"), [((1, 1, 1, 1, 1), Outcome.REPRODUCED), ((2, 3), Outcome.INCONCLUSIVE)])
def test_a_verdict_on_a_handful_of_unpaired_timings_has_no_interval_and_decides_by_the_rank_rule(tmp_path, rounds,
                                                                                               expected):
    """Whole epochs, one per round, not interleaved: their spread is no 95% interval, and no round pairs with another;
    every ratio of one row's rounds to the other's deciding alike decides where 1 / C(n + m, n) <= 0.05 (5 and 5
    rounds: 1/252), not from 2 and 2 (1/6; 5 timings each, in rounds of 2 and 3)."""
    _store(tmp_path, CPU, _epochs(1.0, _speedup_for(3.3)), REAL, rounds=rounds)
    (verdict,) = claim.verdicts(results.load(claim.NAME, tmp_path))
    assert verdict.outcome == expected and verdict.fewest_timings == 5
    assert verdict.interval_name == "rough range from few timings, not a 95% interval"  # what the page's box says
    assert verdict.interval_text.endswith(" (few timings: a row of 5)")
    if expected == Outcome.REPRODUCED:
        assert f"all 25 ratios of its 5 and 5 rounds timed apart" in verdict.ours_text
    else:
        assert verdict.ours_text.endswith("few timings: it rests on a row of 5 timings, fewer than 7, too few for a 95% "
                                          "interval, and too few, or too scattered, for the rule for few timings")


def _paired_rounds(tmp_path, per_round_speedups: list[float]):
    """Whole epochs, one per round, interleaved: auto buckets `per_round_speedups[i]` x faster than per-batch padding
    in round i (the H100's five rounds lay in 0.888-1.012)."""
    auto = _speedup_for(1.0)

    def samples_of(plan, call):
        return tuple(call / s for s in per_round_speedups) if plan == claim.AUTO else (call,) * len(per_round_speedups)

    _store(tmp_path, CPU, _epochs(1.0, auto), REAL, rounds=(1,) * len(per_round_speedups), seed=7,
           samples_of=samples_of)
    (verdict,) = claim.verdicts(results.load(claim.NAME, tmp_path))
    return verdict


@pytest.mark.parametrize(("per_round", "expected"), [
    ([0.888, 0.95, 1.012, 0.93, 0.97], Outcome.NOT_REPRODUCED),  # 5 of 5 below the edge: 0.5^5 = 0.031 decides
    ([3.0, 3.4, 3.1, 3.6, 3.2], Outcome.REPRODUCED),
    ([0.888, 0.95, 1.012, 0.93], Outcome.INCONCLUSIVE),  # 4 of 4: 0.5^4 = 0.0625, too few
    ([0.9, 0.95, 1.6, 0.93, 0.97], Outcome.INCONCLUSIVE),  # one round across the edge
])
def test_few_paired_timings_decide_only_when_every_round_lies_in_one_region(tmp_path, per_round, expected):
    verdict = _paired_rounds(tmp_path, per_round)
    assert verdict.fewest_timings == len(per_round) and verdict.outcome == expected
    if expected != Outcome.INCONCLUSIVE:
        assert f"all {len(per_round)} paired rounds ({min(per_round):.3g}-{max(per_round):.3g})" in verdict.ours_text
