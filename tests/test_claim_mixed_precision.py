"""Claim 3's verdict logic on synthetic result frames: each outcome can come out, and the rule reads the
right kernel, precision and shapes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lstmstudy.claims import mixed_precision as claim
from lstmstudy.errors import ParameterError
from lstmstudy.rules import Outcome
from lstmstudy.shapes import LSTMShape

CPU = "cpu-xeon-test-2t"
GPU = "cuda-h100-test"
PAGE = Path(__file__).resolve().parent.parent / "book" / "claims" / f"{claim.CLAIM.stem}.ipynb"


def row(hardware_id: str, precision: str, phase: str, hidden: int, timesteps: int, ms: float, *,
        kernel: str = "torch.fused", batch: int = 32, status: str = "ok", observed: str = "onednn",
        error: str = "") -> dict:
    samples = list(np.linspace(0.98, 1.02, 9) * ms / 1e3) if status == "ok" else []
    return {"hardware_id": hardware_id, "device_kind": "cuda" if hardware_id.startswith("cuda-") else "cpu",
            "kernel": kernel, "precision": precision, "phase": phase, "batch": batch, "timesteps": timesteps,
            "features": 32, "hidden": hidden, "layers": 1, "bidirectional": False, "config": "{}",
            "status": status, "error": error, "samples": samples,
            "median_s": float(np.median(samples)) if samples else np.nan,
            "observed_kernel": observed if status == "ok" else "", "predicted_kernel": ""}


def frame(hardware_id: str, small: float, large: float, precision: str = "bf16",
          phases: tuple[str, ...] = ("inference", "train"), large_steps: int = 64,
          large_batch: int = 32) -> pd.DataFrame:
    """fp32 at 10 ms everywhere; `precision` `small`x faster at H=64 T=16, `large`x faster at H=1024 T=64 (or
    `large_steps`, `large_batch`: T=1000 B=256 is at the paper's sizes), and 1.0x at the shapes in between."""
    rows = []
    for phase in phases:
        for hidden, steps, batch, speedup in ((64, 16, 32, small), (64, 64, 32, 1.0), (1024, 16, 32, 1.0),
                                              (1024, large_steps, large_batch, large)):
            rows.append(row(hardware_id, "fp32", phase, hidden, steps, 10.0, batch=batch))
            rows.append(row(hardware_id, precision, phase, hidden, steps, 10.0 / speedup, batch=batch))
    return pd.DataFrame(rows)


def outcome(data: pd.DataFrame, hardware_id: str = CPU) -> Outcome:
    return next(v.outcome for v in claim.verdicts(data) if v.hardware_id == hardware_id)


def test_speedup_is_fp32_over_low_precision():
    data = pd.DataFrame([row(CPU, "fp32", "inference", 64, 16, 2.0), row(CPU, "bf16", "inference", 64, 16, 1.0)])
    table = claim.speedups(data)
    assert len(table) == 1 and table.ratio[0] == pytest.approx(2.0)
    assert table.ratio_lo[0] <= 2.0 <= table.ratio_hi[0]
    assert table.fp32_ms[0] == pytest.approx(2.0) and table.low_ms[0] == pytest.approx(1.0)


@pytest.mark.parametrize(("small", "large", "expected"), [
    (0.9, 1.5, Outcome.REPRODUCED),          # slower when small (the casts cost more), faster when large
    (0.95, 1.16, Outcome.REPRODUCED),        # close to both edges, each interval on its side
    (1.03, 1.5, Outcome.PARTLY),             # no slower when small: part (i) fails, as the seed's "greater" needs
    (1.3, 1.5, Outcome.PARTLY),              # faster everywhere: part (i) fails
    (0.8, 1.05, Outcome.PARTLY),             # slower when small, no gain when large: part (ii) fails
    (1.3, 1.0, Outcome.NOT_REPRODUCED),      # the reverse of the claim
])
def test_each_outcome(small, large, expected):
    assert outcome(frame(CPU, small, large)) == expected


@pytest.mark.parametrize(("small", "large"), [
    (claim.SMALL_MAX, 1.5),        # part (i) undecided, part (ii) holds: reproduced or partly
    (claim.SMALL_MAX, 1.0),        # part (i) undecided, part (ii) fails: partly or not reproduced
    (1.3, claim.LARGE_MIN),        # part (i) fails, part (ii) undecided
])
def test_an_interval_across_a_threshold_is_inconclusive(small, large):
    verdict = next(v for v in claim.verdicts(frame(CPU, small, large)))
    assert verdict.outcome == Outcome.INCONCLUSIVE and "undecided" in verdict.ours_text
    assert verdict.low < verdict.ours < verdict.high


@pytest.mark.parametrize(("inference", "train", "expected"), [
    ((0.9, 1.5), (1.3, 1.0), Outcome.REPRODUCED),  # training says the reverse: it does not decide
    ((1.2, 1.5), (0.8, 1.5), Outcome.PARTLY),      # training alone would reproduce it
])
def test_inference_decides_and_training_is_shown_beside_it(inference, train, expected):
    data = pd.concat([frame(CPU, *inference, phases=("inference",)), frame(CPU, *train, phases=("train",))],
                     ignore_index=True)
    (verdict,) = claim.verdicts(data)
    assert verdict.outcome == expected and verdict.ours == pytest.approx(inference[1])
    decided, beside = verdict.ours_text.split("training, beside it and not deciding: ")
    assert f"{inference[0]:.2f}x" in decided and f"{train[0]:.2f}x" in beside
    # the page shows both intervals that decided, each with its part
    assert [name for name, _, _ in verdict.parts] == ["part (i)", "part (ii)"]
    assert verdict.parts[0][1] < inference[0] < verdict.parts[0][2]
    assert "part (i)" in verdict.interval_text and "part (ii)" in verdict.interval_text


def test_training_alone_is_not_measured():
    (verdict,) = claim.verdicts(frame(CPU, 0.9, 1.5, phases=("train",)))
    assert verdict.outcome == Outcome.NOT_MEASURED and "inference" in verdict.ours_text


def amp(hardware_id: str, small: float, large: float, **shape) -> pd.DataFrame:
    """The AMP step's fp16 rows (torch.fused under autocast, fp32 weights), beside torch.fused's fp32 rows."""
    data = frame(hardware_id, small, large, precision="fp16", **shape)
    return data.assign(config=data.config.where(data.precision == "fp32", claim.AMP_CONFIG))


def test_the_headline_precision_and_step_depend_on_the_device_kind():
    # a GPU reads fp16 under autocast, the casts inside the step: bf16 rows, and fp16 held in 16 bits, that would
    # reproduce the claim are not what it reads
    at_paper = dict(large_steps=1000, large_batch=256)
    gpu = pd.concat([frame(GPU, 0.9, 1.5, precision="bf16", **at_paper),
                     frame(GPU, 0.9, 1.5, precision="fp16", **at_paper), amp(GPU, 1.3, 1.0, **at_paper)],
                    ignore_index=True)
    assert outcome(gpu, GPU) == Outcome.NOT_REPRODUCED
    assert f"fp16 over fp32 ({claim.AMP_KERNEL})" in claim.verdicts(gpu)[0].ours_text
    # fp16 held in 16 bits alone leaves a GPU unmeasured, saying which step it lacks
    (held,) = claim.verdicts(frame(GPU, 0.9, 1.5, precision="fp16"))
    assert held.outcome == Outcome.NOT_MEASURED and f"pair of {claim.AMP_KERNEL} inference" in held.ours_text
    # a CPU reads bf16 of torch.fused (there it runs under autocast): fp16 rows alone leave it unmeasured
    assert outcome(frame(CPU, 0.9, 1.5, precision="fp16")) == Outcome.NOT_MEASURED


def test_the_amp_step_is_paired_with_the_fused_fp32_rows_and_named_apart():
    table = claim.speedups(pd.concat([amp(GPU, 0.9, 1.5), frame(GPU, 1.2, 1.2, precision="fp16")],
                                     ignore_index=True))
    assert set(table.kernel) == {"torch.fused", claim.AMP_KERNEL}
    ratios = table.set_index(["kernel", "phase", "hidden", "timesteps"]).ratio
    assert ratios[claim.AMP_KERNEL, "inference", 1024, 64] == pytest.approx(1.5)
    assert ratios["torch.fused", "inference", 1024, 64] == pytest.approx(1.2)
    observed = claim.observed_table(amp(GPU, 0.9, 1.5))
    assert set(observed.kernel) == {"torch.fused", claim.AMP_KERNEL}


def test_a_gpu_grid_has_an_autocast_row_beside_each_held_fp16_row_and_a_cpu_grid_none():
    from lstmstudy import contract

    gpu = claim.CLAIM.points("cuda")
    held = {(p.shape, p.phase) for p in gpu if p.kernel == "torch.fused" and p.precision == "fp16" and not p.config}
    autocast = {(p.shape, p.phase) for p in gpu if p.config == contract.AUTOCAST}
    # every shape the verdict and the figures read (DeepBench's training shapes stay held, as DeepBench ran them)
    assert autocast and autocast <= held and {s for s in held if s[1] == "inference"} <= autocast
    assert all(p.precision == "fp16" for p in gpu if p.config == contract.AUTOCAST)
    assert not any(p.config for p in claim.CLAIM.points("cpu"))


def test_other_kernels_and_skipped_rows_do_not_count():
    data = frame(CPU, 0.9, 1.5)
    keras = frame(CPU, 1.3, 1.0).assign(kernel="keras.cudnn_auto")
    skipped = pd.DataFrame([row(CPU, "bf16", "train", 4096, 64, 1.0, status="skipped", error="no primitive")])
    assert outcome(pd.concat([data, keras, skipped], ignore_index=True)) == Outcome.REPRODUCED


def test_smallest_and_largest_are_by_flops_not_by_grid_position():
    data = frame(CPU, 0.9, 1.5, phases=("inference",))
    # a batch-sweep point, 2x faster: H=256 T=64 at batch 1 is 3.8e7 FLOPs, more than H=64 T=16 at batch 32 (2.5e7)
    sweep = pd.DataFrame([row(CPU, "fp32", "inference", 256, 64, 10.0, batch=1),
                          row(CPU, "bf16", "inference", 256, 64, 5.0, batch=1)])
    ends = claim.extremes(pd.concat([data, sweep], ignore_index=True)).set_index("end")
    assert ends.loc["smallest", "shape"] == "H=64 T=16 B=32"
    assert ends.loc["largest", "shape"] == "H=1024 T=64 B=32"
    # at 8 timesteps it is 4.7e6 FLOPs, the smallest configuration: part (i) now fails
    shorter = pd.concat([data, sweep.assign(timesteps=8)], ignore_index=True)
    assert claim.extremes(shorter).set_index("end").loc["smallest", "shape"] == "H=256 T=8 B=1"
    assert outcome(shorter) == Outcome.PARTLY


def test_one_shape_or_no_data_is_not_measured():
    one = pd.DataFrame([row(CPU, "fp32", "inference", 64, 16, 2.0), row(CPU, "bf16", "inference", 64, 16, 2.0)])
    verdicts = claim.verdicts(one)
    assert [v.outcome for v in verdicts] == [Outcome.NOT_MEASURED] and verdicts[0].ours is None
    assert claim.verdicts(pd.DataFrame(columns=one.columns)) == []


def test_grid_interleaves_precisions_and_puts_keras_per_device_kind():
    kwargs = dict(quick=False, hiddens=[64, 256], timesteps=[16, 64], batches=[32], batch_sweep=[1, 32],
                  sweep_hidden=256, keras_cpu_hidden=64, keras_cpu_timesteps=16, features=32,
                  precisions=["fp16", "bf16"], phases=["inference"])
    cpu = claim.grid(kind="cpu", **kwargs)
    assert [p.precision for p in cpu[:3]] == ["fp32", "bf16", "fp16"]
    assert len({p.shape for p in cpu[:3]}) == 1
    keras = [p for p in cpu if p.kernel == claim.KERAS_KERNEL]
    assert {(p.shape.hidden, p.shape.timesteps) for p in keras} == {(64, 16)}
    # the batch sweep's batch 32 point is the heatmap's (256, 64) point: stored once
    fused = [p for p in cpu if p.kernel == claim.HEADLINE_KERNEL]
    assert len(fused) == len({p.key() for p in fused}) == 3 * (4 + 1)
    gpu = claim.grid(kind="cuda", **kwargs)
    assert len([p for p in gpu if p.kernel == claim.KERAS_KERNEL]) == 3 * 4
    quick = claim.grid(kind="cpu", **{**kwargs, "quick": True})
    assert {p.shape.hidden for p in quick if p.kernel == claim.HEADLINE_KERNEL} == {64, 256}
    assert max(p.shape.timesteps for p in quick) <= 16


GPU_ONLY = ("deepbench_shapes", "paper_hiddens", "paper_timesteps", "paper_batches")


def test_the_default_grids_per_device_kind():
    cpu, cuda = claim.CLAIM.defaults["cpu"], claim.CLAIM.defaults["cuda"]
    assert cuda["hiddens"] == cpu["hiddens"]  # DeepBench's shapes take a GPU to hidden 4096 and batch 128
    assert (cpu["deepbench_shapes"], cuda["deepbench_shapes"]) == (False, True)
    # the paper's block on a GPU only: a CPU's fp32 call at H=1024 T=1000 B=256 takes seconds
    assert not (cpu["paper_hiddens"] or cpu["paper_timesteps"] or cpu["paper_batches"])
    assert {k: v for k, v in cpu.items() if k not in GPU_ONLY} == {k: v for k, v in cuda.items() if k not in GPU_ONLY}
    assert len(claim.CLAIM.points("cuda")) > len(claim.CLAIM.points("cpu"))
    assert claim.CLAIM.parameters("cpu", hiddens=[64])["hiddens"] == [64]
    assert not any(p.shape.batch >= claim.PAPER_MIN_BATCH for p in claim.CLAIM.points("cpu"))


@pytest.mark.parametrize("select", ["all", "lease"])
def test_the_gpu_grids_reach_the_papers_sizes_with_its_smaller_corners_kept(select):
    """The lease's grid and the default one hold the AMP step's fp16 and fp32 inference at T >= 1000, H >= 512 and
    B = 256 (hidden 512 and 1024 both), and still the smallest corner where part (i) is decided."""
    points = claim.CLAIM.points("cuda", select=select)
    inference = [p for p in points if p.kernel == claim.HEADLINE_KERNEL and p.phase == "inference"]
    paper = {(p.shape.hidden, p.shape.timesteps, p.shape.batch) for p in inference
             if claim.at_paper_sizes(p.shape.hidden, p.shape.timesteps, p.shape.batch)}
    assert {(512, 1000, 256), (1024, 1000, 256)} <= paper
    for shape in paper:
        timed = {(p.precision, bool(p.config)) for p in inference
                 if (p.shape.hidden, p.shape.timesteps, p.shape.batch) == shape}
        assert {("fp32", False), ("fp16", True)} <= timed  # the AMP step and its fp32 row
    smallest = min((p.shape for p in inference), key=lambda s: s.flops())
    assert (smallest.hidden, smallest.timesteps, smallest.batch) == (64, 16, 32)
    assert max((p.shape for p in inference), key=lambda s: s.flops()).timesteps >= claim.PAPER_MIN_TIMESTEPS


def test_keras_mixed_float16_stands_beside_autocast_at_the_papers_sizes_on_a_gpu_only():
    """Keras's mixed_float16 policy (the paper's TensorFlow AMP) is in the default GPU grid at every shape of the
    paper's block, beside the AMP step; a CPU runs no fused Keras kernel, so its grid sets none beside autocast."""
    from lstmstudy.kernels.keras_kernels import POLICIES

    assert POLICIES["fp16"] == "mixed_float16"
    gpu = claim.CLAIM.points("cuda")
    paper = {p.shape for p in gpu if p.shape.batch == claim.PAPER_MIN_BATCH and p.kernel == claim.HEADLINE_KERNEL}
    keras = {p.shape for p in gpu if p.kernel == claim.KERAS_KERNEL and p.precision == "fp16"
             and p.phase == "inference"}
    assert paper and paper <= keras
    cpu_keras = [p for p in claim.CLAIM.points("cpu") if p.kernel == claim.KERAS_KERNEL]
    assert len({p.shape for p in cpu_keras}) == 1  # one shape, context for the generic loop's cost


def test_the_sweep_times_each_group_in_enough_rounds_for_an_interval(monkeypatch):
    """A step that fills a round's burst with one call (the paper's sizes on a GPU, H=1024 on a CPU) gets ROUNDS
    timings, at least the 7 a 95% interval needs (`rules.FEW_TIMINGS`), with the same sampling time; a
    quick run keeps the quick plan."""
    from lstmstudy import sweep
    from lstmstudy.rules import FEW_TIMINGS

    plans = []
    monkeypatch.setattr(sweep, "run", lambda name, points, prepare, plan, **options: plans.append(plan))
    claim.measure([], device="cpu", min_time=0.1)
    claim.measure([], device="cpu", min_time=0.1, quick=True)
    full, quick = plans
    assert full.rounds == claim.ROUNDS >= FEW_TIMINGS and full.burst_s * full.rounds == pytest.approx(0.1)
    assert sum(full.each().rounds for _ in range(full.processes)) >= FEW_TIMINGS
    assert quick.rounds == 2


def test_the_gpu_plan_prices_the_papers_sizes_from_their_flops():
    """Each point's planned call is never faster than its arithmetic at the full GEMM rate the H100 measured (54
    TFLOP/s fp32), the paper's largest fp32 call is planned at twice that bound, a point of the paper's sizes is
    planned longer the more arithmetic it holds, and the claim's and the lease's seconds per point are the means of
    the points' plans, so the lease's plan adds every point's."""
    from lstmstudy import contract

    def rate(p: contract.Point) -> float:
        return 54.2e12 if p.precision == "fp32" else 771.7e12

    points = claim.CLAIM.points("cuda")
    for p in points:
        assert claim.planned_call_s(p) >= p.shape.flops(p.phase) / rate(p)
    largest = contract.Point(claim.HEADLINE_KERNEL, LSTMShape(batch=256, timesteps=1000, features=32, hidden=1024))
    assert claim.planned_call_s(largest) == pytest.approx(largest.shape.flops() / 26.5e12)
    at_paper = [p for p in points if p.precision == "fp32"
                and claim.at_paper_sizes(p.shape.hidden, p.shape.timesteps, p.shape.batch)]
    smallest, largest = (f(at_paper, key=lambda p: p.shape.flops(p.phase)) for f in (min, max))
    assert smallest.shape.flops(smallest.phase) < largest.shape.flops(largest.phase)
    assert claim.planned_point_s(largest) > claim.planned_point_s(smallest)
    assert claim.planned_point_s(largest) >= largest.shape.flops(largest.phase) / rate(largest)
    lease = claim.CLAIM.points("cuda", select="lease")
    assert claim.CLAIM.lease.seconds_per_point * len(lease) == pytest.approx(
        sum(map(claim.planned_point_s, lease)), abs=0.02 * len(lease))
    assert claim.CLAIM.seconds_per_point["cuda"] > claim.PLAN_BASE_S  # the paper's block costs more than the rest


@pytest.mark.parametrize("bad", [dict(hiddens=[]), dict(batch_sweep=[0]), dict(sweep_hidden=True),
                                 dict(precisions=["fp32"]), dict(phases=["backward"]), dict(batch=[32])])
def test_bad_parameters_name_themselves(bad):
    name = next(iter(bad))
    with pytest.raises(ParameterError, match=f"'{name}'"):
        claim.CLAIM.parameters("cpu", **bad)


def test_tables_show_what_ran_and_what_did_not():
    data = pd.concat([frame(CPU, 1.0, 1.5, phases=("inference",)),
                      pd.DataFrame([row(CPU, "fp16", "train", 64, 16, 1.0, status="skipped", error="oneDNN: no")])],
                     ignore_index=True)
    observed = claim.observed_table(data).set_index(["kernel", "phase"])
    assert observed.loc[("torch.fused", "inference"), "bf16"] == "onednn (4)"
    assert observed.loc[("torch.fused", "train"), "fp16"] == "skipped"
    skipped = claim.skipped_table(data)
    assert skipped.reason.tolist() == ["oneDNN: no"]


@pytest.mark.slow
def test_the_page_renders_a_gpu_set_and_judges_its_amp_step(tmp_path):
    """A GPU set as the lease stores it: the AMP step (slower when small, 1.5x when large) decides, and the held
    fp16 rows (faster everywhere) are shown beside it under their own name."""
    from pathlib import Path

    import nbformat
    import papermill
    import torch

    from lstmstudy import contract, hardware, results, sweep, timing
    from lstmstudy.kernels.built import DTYPE_NAMES
    from lstmstudy.observe import Observation

    gpu = hardware.Fingerprint(device_kind="cuda", cpu_model="Fake Xeon", cpu_flags=[], physical_cores=16, threads=16,
                               ram_gb=128.0, gpu_name="NVIDIA H100 80GB HBM3", gpu_count=1)
    rows = []
    for point in claim.CLAIM.points("cuda", select="lease"):
        large = point.shape.hidden == 1024
        ms = 1.0 if point.precision == "fp32" else (1 / 1.5 if large else 1.25) if point.config else 0.5
        samples = tuple(float(s) for s in np.linspace(0.98, 1.02, 9) * ms / 1e3)
        m = timing.Measurement(samples=samples, warmup=1, threads=16, sync="cuda-events", round_sizes=(3, 3, 3),
                               seed=1, noisy=False)
        outcome = contract.PointResult(m, observed=Observation("cudnn", {}), compute_dtype=DTYPE_NAMES[point.precision])
        rows.append(sweep.make_row(claim.NAME, point, torch.device("cuda"), gpu, outcome=outcome))
    results.append(claim.NAME, gpu.hardware_id, rows, tmp_path / "results")
    (verdict,) = claim.verdicts(results.load(claim.NAME, tmp_path / "results"))
    assert verdict.outcome == Outcome.REPRODUCED and f"({claim.AMP_KERNEL})" in verdict.ours_text
    out = tmp_path / "03.ipynb"
    papermill.execute_notebook(str(Path(__file__).resolve().parent.parent / "notebooks" / "03_mixed_precision.ipynb"),
                               str(out), kernel_name="python3", progress_bar=False,
                               parameters={"measure": False, "results_dir": str(tmp_path / "results")})
    outputs = [o for c in nbformat.read(out, as_version=4).cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = " ".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert claim.AMP_KERNEL in text and "reproduced" in text


def page_cells(kind: str) -> list[str]:
    """The sources of the rendered page's cells of `kind` ('markdown', 'code')."""
    return ["".join(c["source"]) for c in json.loads(PAGE.read_text())["cells"] if c["cell_type"] == kind]


def test_the_page_and_the_module_say_what_the_page_shows_of_deepbench():
    """The page judges DeepBench's speed-ups and sets its times beside ours: no text may say they are not quoted."""
    code, markdown = "\n".join(page_cells("code")), "\n".join(page_cells("markdown"))
    assert "published_rules.deepbench_speedups()" in code and "published_rules.beside_deepbench(" in code
    for text in (" ".join(markdown.split()), " ".join(claim.__doc__.split())):
        assert "not quoted" not in text and "quotes no figure" not in text
        assert "DeepBench" in text and "never counted among this study's verdicts" in text


def test_the_pages_words_hold_with_or_without_a_gpu_set():
    """What the page says of the GPU side stays true whatever sets are stored: the GPU verdict reads the AMP step,
    and DeepBench's shapes are set beside a GPU set's rows wherever one holds them, not 'once' one does."""
    markdown = " ".join(" ".join(page_cells("markdown")).split())
    assert "once a GPU set holds" not in markdown
    assert f"on a GPU `{claim.AMP_KERNEL}`" in markdown
    assert "the module held in the 16-bit type on a GPU" not in markdown


def few(data: pd.DataFrame, hidden: int = 1024, timesteps: int = 64, seed: int | None = None,
        speedups: Sequence[float] | None = None) -> pd.DataFrame:
    """`data` with its (hidden, timesteps) rows timed in 5 single-sample rounds, and every row in rounds (with one
    seed: interleaved); `speedups`: the 16-bit rows' per-round speed-ups there (the fp32 rows at 10 ms)."""
    data = data.assign(round_sizes=[[2, 2, 2, 2, 1]] * len(data), round_seed=seed)
    at = (data.hidden == hidden) & (data.timesteps == timesteps)
    data.loc[at, "round_sizes"] = data.loc[at, "round_sizes"].map(lambda _: [1, 1, 1, 1, 1])
    data.loc[at, "samples"] = data.loc[at, "samples"].map(lambda s: s[:5])
    if speedups is not None:
        low = at & (data.precision != "fp32")
        data.loc[low, "samples"] = data.loc[low, "samples"].map(lambda _: [10.0 / x / 1e3 for x in speedups])
        data.loc[at & (data.precision == "fp32"), "samples"] = data.loc[at & (data.precision == "fp32"),
                                                                         "samples"].map(lambda _: [10.0 / 1e3] * 5)
    data.loc[at, "median_s"] = data.loc[at, "samples"].map(np.median)
    return data


def test_a_part_resting_on_a_handful_of_timings_is_undecided_and_its_spread_is_no_95_percent_interval():
    """The largest shape timed in 5 single-sample rounds, apart from its fp32 row, whose ratios straddle part (ii)'s
    edge: part (ii) could go either way, so a claim that would be reproduced is inconclusive, and its spread is named
    for what it is: few timings."""
    verdict = next(v for v in claim.verdicts(few(frame(CPU, 0.9, 1.5), speedups=[1.5, 1.2, 1.0, 1.3, 1.4]))
                   if v.hardware_id == CPU)
    assert verdict.outcome == Outcome.INCONCLUSIVE
    assert "part (i) holds, part (ii), a CPU analogue at the grid's largest shape" in verdict.ours_text
    assert "undecided (few timings: it rests on a row of 5 timings" in verdict.ours_text
    assert "x (few timings (5), a rough range: " in verdict.ours_text
    assert verdict.fewest_timings == 5 and "low precision" not in verdict.ours_text
    assert outcome(frame(CPU, 0.9, 1.5).assign(round_sizes=[[2, 2, 2, 2, 1]] * 16)) == Outcome.REPRODUCED


def test_few_timings_timed_apart_decide_by_their_ranks_when_every_ratio_agrees():
    """Rows timed apart (no shared rounds): 5 and 5 round medians, every ratio of one to the other above part (ii)'s
    edge, happen by chance with probability 1/C(10, 5) at most, so they decide it (the rank half of the rule)."""
    verdict = next(v for v in claim.verdicts(few(frame(CPU, 0.9, 1.5), speedups=[1.4, 1.5, 1.6, 1.45, 1.55])))
    assert verdict.outcome == Outcome.REPRODUCED
    assert "rounds timed apart" in verdict.ours_text and "1/C(10, 5)" in verdict.ours_text


@pytest.mark.parametrize(("speedups", "expected", "words"), [
    ([1.4, 1.5, 1.6, 1.45, 1.55], Outcome.REPRODUCED, "part (ii), a CPU analogue"),  # 5 of 5 above 1.10: decided
    ([1.4, 1.5, 1.6, 1.45, 1.05], Outcome.INCONCLUSIVE, "undecided (few timings"),    # one round below: undecided
    ([1.0, 1.02, 0.98, 1.05, 1.01], Outcome.PARTLY, "fails (a row of 5 timings"),     # 5 of 5 below: fails
])
def test_few_timings_decide_a_part_when_all_their_paired_rounds_agree(speedups, expected, words):
    """The rule for few timings (a sign test): 5 paired rounds all on one side of part (ii)'s edge decide it."""
    verdict = next(v for v in claim.verdicts(few(frame(CPU, 0.9, 1.5), seed=7, speedups=speedups)))
    assert verdict.outcome == expected and words in verdict.ours_text
    if expected != Outcome.INCONCLUSIVE:
        assert "decided by the rule for few timings" in verdict.ours_text and "0.5^5 = 0.031" in verdict.ours_text


def paper(hardware_id: str, small: float, large: float, paper_ratio: float | None) -> pd.DataFrame:
    """A GPU set's AMP step: `amp` rows (H=64 T=16 and H=1024 T=64 at B=32) and, where `paper_ratio` is given, the
    paper's H=1024 T=1000 B=256 at that speed-up; its held fp16 rows 3x faster everywhere."""
    data = amp(hardware_id, small, large)
    if paper_ratio is not None:
        data = pd.concat([data, pd.DataFrame([
            row(hardware_id, "fp32", "inference", 1024, 1000, 80.0, batch=256, observed="cudnn"),
            {**row(hardware_id, "fp16", "inference", 1024, 1000, 80.0 / paper_ratio, batch=256, observed="cudnn"),
             "config": claim.AMP_CONFIG},
            row(hardware_id, "fp16", "inference", 1024, 1000, 80.0 / 3, batch=256, observed="cudnn")])],
            ignore_index=True)
    return data


def test_a_gpu_set_without_the_papers_sizes_reads_not_measured_there_never_fails():
    """Its largest shape failing part (ii) says nothing of the paper's sizes: part (ii) is not measured there, so
    the verdict is 'not measured', with part (i) and the largest shape shown; with the paper's row, that row decides."""
    (verdict,) = claim.verdicts(paper(GPU, 0.8, 1.0, None))
    assert verdict.outcome == Outcome.NOT_MEASURED and verdict.ours is None
    assert verdict.ours_text.startswith("not measured at the paper's sizes: ")
    assert "part (i) holds, part (ii) not measured at the paper's sizes" in verdict.ours_text
    assert "part (ii) fails" not in verdict.ours_text and "(not at the paper's sizes)" in verdict.ours_text
    assert [name for name, _, _ in verdict.parts] == ["part (i)"]
    for ratio, expected in ((1.3, Outcome.REPRODUCED), (1.0, Outcome.PARTLY)):
        (verdict,) = claim.verdicts(paper(GPU, 0.8, 1.0, ratio))
        assert verdict.outcome == expected and verdict.ours == pytest.approx(ratio)
        assert "at the paper's sizes" in verdict.ours_text and "H=1024 T=1000 B=256" in verdict.ours_text


def test_a_cpu_set_reads_part_ii_at_the_papers_sizes_where_it_holds_them():
    """A CPU grid taken to the paper's sizes (a `grid` override) decides part (ii) there, not at a larger shape, and
    no longer calls it below the paper's sizes; without them, at its grid's largest shape, named as smaller."""
    at_paper = frame(CPU, 0.9, 1.3, large_steps=1000, large_batch=256)
    larger = pd.DataFrame([row(CPU, "fp32", "inference", 4096, 128, 50.0, batch=256),
                           row(CPU, "bf16", "inference", 4096, 128, 50.0 / 0.9, batch=256)])
    (verdict,) = claim.verdicts(pd.concat([at_paper, larger], ignore_index=True))
    assert verdict.outcome == Outcome.REPRODUCED and verdict.ours == pytest.approx(1.3)
    assert "part (ii), a CPU analogue at the paper's sizes (its fp32 step ran at" in verdict.ours_text
    assert "below the paper's sizes" not in verdict.ours_text
    (smaller,) = claim.verdicts(frame(CPU, 0.9, 1.3))
    assert "a CPU analogue at the grid's largest shape (H=1024 T=64 B=32, below the paper's sizes" in smaller.ours_text


def test_part_ii_reads_the_paper_row_with_the_most_flops_not_a_larger_shape_elsewhere():
    """A shape with more FLOPs than the paper's but fewer than 1000 time steps does not decide part (ii) on a GPU."""
    data = paper(GPU, 0.8, 1.0, 1.3)
    big = [row(GPU, "fp32", "inference", 4096, 128, 50.0, batch=256, observed="cudnn"),
           {**row(GPU, "fp16", "inference", 4096, 128, 50.0 / 0.9, batch=256, observed="cudnn"),
            "config": claim.AMP_CONFIG}]
    (verdict,) = claim.verdicts(pd.concat([data, pd.DataFrame(big)], ignore_index=True))
    assert verdict.outcome == Outcome.REPRODUCED and verdict.ours == pytest.approx(1.3)
    ends = claim.extremes(pd.concat([data, pd.DataFrame(big)], ignore_index=True))
    ends = ends[ends.phase == "inference"].set_index("end")
    assert ends.loc["largest", "shape"] == "H=4096 T=128 B=256"
    assert ends.loc[claim.ENDS[2], "shape"] == "H=1024 T=1000 B=256"


def test_the_stored_h100_set_reads_not_measured_at_the_papers_sizes():
    """The first GPU set stops at H=1024 T=128 B=32: part (i) is decided there, part (ii) is not measured at the
    paper's sizes, whatever its 0.99x says; a CPU set's part (ii) is an analogue at its grid's largest shape, in
    bf16."""
    from lstmstudy import results

    verdicts = {v.hardware_id: v for v in claim.CLAIM.judge(results.load(claim.NAME))}
    h100 = verdicts["cuda-h100-80gb-hbm3-2a1d35"]
    assert h100.outcome == Outcome.NOT_MEASURED and "part (ii) fails" not in h100.ours_text
    assert "part (i) holds, part (ii) not measured at the paper's sizes" in h100.ours_text
    # the paper's TensorFlow AMP ran as the mixed_float16 policy of Keras on its torch backend there
    keras = claim.keras_words(results.load(claim.NAME))
    assert keras["cuda-h100-80gb-hbm3-2a1d35"] == "Keras 3.15 on its torch backend"
    for hardware_id, verdict in verdicts.items():
        assert "low precision" not in verdict.ours_text
        if hardware_id.startswith("cpu-") and "part (ii)" in verdict.ours_text:
            assert "bf16 over fp32" in verdict.ours_text and "fp16" not in verdict.ours_text
            assert "a CPU analogue at the grid's largest shape" in verdict.ours_text


def test_every_row_shows_its_achieved_tflops_beside_the_roofline():
    """Achieved TFLOP/s = FLOPs / median time, beside the set's limit at the row's type, and the share; a set with
    no roofline leaves them empty; the stored H100's largest fp32 inference row runs at a sixth of its GEMM rate."""
    from lstmstudy import results
    from lstmstudy.roofline import Limit

    data = frame(CPU, 0.9, 1.5, phases=("inference",))
    limits = {CPU: {"fp32": Limit(2e12, 2e12, "GEMM n=2048"), "bf16": Limit(4e12, 4e12, "GEMM n=2048")}}
    table = claim.roofline_table(data, limits=limits)
    assert len(table) == len(claim.speedups(data)) == 4
    top = table[(table.hidden == 1024) & (table.timesteps == 64)].iloc[0]
    flops = LSTMShape(batch=32, timesteps=64, features=32, hidden=1024).flops()
    assert top["fp32 TFLOP/s"] == pytest.approx(flops / 10e-3 / 1e12)
    assert top["16-bit TFLOP/s"] == pytest.approx(1.5 * flops / 10e-3 / 1e12)
    assert top["fp32 share %"] == pytest.approx(100 * flops / 10e-3 / 2e12)
    assert top["16-bit roofline TFLOP/s"] == pytest.approx(4.0) and "GEMM n=2048" in top["roofline set by"]
    bare = claim.roofline_table(data, limits={})
    assert bare["fp32 share %"].isna().all() and set(bare["roofline set by"]) == {"no roofline stored"}

    stored = claim.roofline_table(results.load(claim.NAME)).set_index(["hardware_id", "kernel", "phase", "hidden",
                                                                      "timesteps", "batch"])
    h100 = stored.loc[("cuda-h100-80gb-hbm3-2a1d35", claim.AMP_KERNEL, "inference", 1024, 128, 32)]
    assert h100["fp32 TFLOP/s"] == pytest.approx(8.89, rel=0.01) and h100["fp32 roofline TFLOP/s"] > 50
    assert h100["fp32 share %"] < 20 and h100["16-bit share %"] < 2


def test_the_page_glues_the_rule_from_the_claim_and_calls_bf16_bf16():
    """The page prints the rule the code decides by, glued, never a hand-written copy of its thresholds; no word
    calls a bf16 figure an fp16 one, and 'low precision' never stands for few timings."""
    import nbformat

    nb = nbformat.read(Path(__file__).resolve().parent.parent / "notebooks" / f"{claim.CLAIM.stem}.ipynb",
                       as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    markdown = " ".join(" ".join(c.source for c in nb.cells if c.cell_type == "markdown").split())
    assert "notebook.judge(claim.CLAIM" in code and "{glue:text}`c03_rule`" in markdown  # judge glues the rule
    assert f"{claim.LARGE_MIN:.2f}" not in markdown and "at or above" not in markdown  # the rule's words are glued
    assert "fp16 speed-up" not in markdown and "fp16 speed-up" not in claim.CLAIM.figure_words
    assert "bf16" in claim.CLAIM.figure_words and "low precision" not in markdown.lower()


def test_a_reason_a_configuration_did_not_run_is_shown_in_plain_words():
    """A stored row keeps the library's exception; the page (the skipped table, a heatmap panel without data) says
    why in words, never the exception's text."""
    error = ("torch.fused at fp16: oneDNN cannot run it here (RuntimeError: could not create a primitive descriptor "
             "for the LSTM forward propagation primitive.)")
    plain = "no fp16 LSTM kernel on this CPU: oneDNN has no fp16 LSTM primitive for it"
    assert claim.reason_words(error, "fp16") == plain
    assert claim.reason_words("torch.fused at fp16: it failed (ValueError: x)", "fp16") == "it failed"
    data = pd.concat([frame(CPU, 1.0, 1.5, phases=("inference",)),
                      pd.DataFrame([row(CPU, "fp16", "train", 64, 16, 1.0, status="skipped", error=error)])],
                     ignore_index=True)
    assert "RuntimeError" not in " ".join(claim.skipped_table(data).reason)
    assert "RuntimeError" not in " ".join(claim.attempted(data).error.dropna().astype(str))


def with_device_time(data: pd.DataFrame) -> pd.DataFrame:
    """`data` with each row's device time: half its wall time at fp32, a quarter at 16 bits, so every speed-up in
    device time is twice the one in wall time (the host's launches hide half of what 16 bits save)."""
    return data.assign(device_s=data.median_s * np.where(data.precision == "fp32", 0.5, 0.25))


def test_a_gpu_speed_up_stands_beside_its_speed_up_in_device_time_and_decides_nothing_new():
    data = paper(GPU, 0.8, 1.0, 1.3)
    timed = with_device_time(data)
    assert [(v.outcome, v.ours, v.ours_text) for v in claim.verdicts(timed)] == \
        [(v.outcome, v.ours, v.ours_text) for v in claim.verdicts(data)]
    ends = claim.extremes(timed).set_index(["phase", "end"])
    assert ends.loc[("inference", claim.ENDS[2]), "device_ratio"] == pytest.approx(2.6)
    assert ends.loc[("inference", "smallest"), "device_ratio"] == pytest.approx(1.6)
    cell = claim.paper_table(timed).iloc[0][claim.PAPER_SERIES[claim.AMP_KERNEL]]
    assert cell.startswith("1.30x (95% interval ") and cell.endswith("; in device time 2.60x")
    assert claim.roofline_table(timed, limits={})[claim.DEVICE_SPEEDUP].notna().all()
    keras = claim.single_shapes(with_device_time(frame(GPU, 0.9, 1.5, precision="fp16").assign(
        kernel=claim.KERAS_KERNEL)))
    assert keras[claim.DEVICE_SPEEDUP].tolist() == pytest.approx(2 * keras["speed-up"])


def test_rows_without_device_time_read_not_recorded():
    """The rows stored before device time was (the first H100 set's) and CPU rows have no speed-up in device time,
    and the page says so in words."""
    from lstmstudy import notebook, results

    cell = claim.paper_table(paper(GPU, 0.8, 1.0, 1.3)).iloc[0][claim.PAPER_SERIES[claim.AMP_KERNEL]]
    assert cell.endswith("; device time not recorded")
    h100 = results.load(claim.NAME, sets="cuda-h100-80gb-hbm3-2a1d35")
    ends = claim.extremes(h100).rename(columns={"device_ratio": claim.DEVICE_SPEEDUP})
    shown = notebook.shown(ends[["end", claim.DEVICE_SPEEDUP]], "", {claim.DEVICE_SPEEDUP: "not recorded"})
    assert len(shown) and set(shown[claim.DEVICE_SPEEDUP]) == {"not recorded"}
    assert claim.roofline_table(h100, limits={})[claim.DEVICE_SPEEDUP].isna().all()
