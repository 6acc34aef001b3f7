"""Claim 3's verdict logic on synthetic result frames: each outcome can come out, and the rule reads the
right kernel, precision and shapes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lstmstudy.claims import mixed_precision as claim
from lstmstudy.errors import ParameterError
from lstmstudy.rules import Outcome

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
          phases: tuple[str, ...] = ("inference", "train")) -> pd.DataFrame:
    """fp32 at 10 ms everywhere; `precision` `small`x faster at H=64 T=16, `large`x faster at H=1024 T=64,
    and 1.0x at the shapes in between."""
    rows = []
    for phase in phases:
        for hidden, steps, speedup in ((64, 16, small), (64, 64, 1.0), (1024, 16, 1.0), (1024, 64, large)):
            rows.append(row(hardware_id, "fp32", phase, hidden, steps, 10.0))
            rows.append(row(hardware_id, precision, phase, hidden, steps, 10.0 / speedup))
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


def amp(hardware_id: str, small: float, large: float) -> pd.DataFrame:
    """The AMP step's fp16 rows (torch.fused under autocast, fp32 weights), beside torch.fused's fp32 rows."""
    data = frame(hardware_id, small, large, precision="fp16")
    return data.assign(config=data.config.where(data.precision == "fp32", claim.AMP_CONFIG))


def test_the_headline_precision_and_step_depend_on_the_device_kind():
    # a GPU reads fp16 under autocast, the casts inside the step: bf16 rows, and fp16 held in 16 bits, that would
    # reproduce the claim are not what it reads
    gpu = pd.concat([frame(GPU, 0.9, 1.5, precision="bf16"), frame(GPU, 0.9, 1.5, precision="fp16"),
                     amp(GPU, 1.3, 1.0)], ignore_index=True)
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


def test_the_default_grids_per_device_kind():
    cpu, cuda = claim.CLAIM.defaults["cpu"], claim.CLAIM.defaults["cuda"]
    assert cuda["hiddens"] == cpu["hiddens"]  # DeepBench's shapes take a GPU to hidden 4096 and batch 128
    assert (cpu["deepbench_shapes"], cuda["deepbench_shapes"]) == (False, True)
    assert {k: v for k, v in cpu.items() if k != "deepbench_shapes"} == {
        k: v for k, v in cuda.items() if k != "deepbench_shapes"}
    assert len(claim.CLAIM.points("cuda")) > len(claim.CLAIM.points("cpu"))
    assert claim.CLAIM.parameters("cpu", hiddens=[64])["hiddens"] == [64]


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


def test_a_part_resting_on_a_handful_of_timings_is_undecided_and_its_spread_is_no_95_percent_interval():
    """The largest shape timed in 5 single-sample rounds: part (ii) could go either way, so a claim that would
    be reproduced is inconclusive, and its spread is named for what it is."""
    data = frame(CPU, 0.9, 1.5).assign(round_sizes=[[2, 2, 2, 2, 1]] * 16)
    few = (data.hidden == 1024) & (data.timesteps == 64)
    data.loc[few, "samples"] = data.loc[few, "samples"].map(lambda s: s[:5])
    data.loc[few, "round_sizes"] = data.loc[few, "round_sizes"].map(lambda _: [1, 1, 1, 1, 1])
    verdict = next(v for v in claim.verdicts(data) if v.hardware_id == CPU)
    assert verdict.outcome == Outcome.INCONCLUSIVE
    assert "part (i) holds, part (ii) undecided (low precision: it rests on a row of 5 timings" in verdict.ours_text
    assert "1.50x (low precision, the spread of 5 timings " in verdict.ours_text
    assert outcome(frame(CPU, 0.9, 1.5).assign(round_sizes=[[2, 2, 2, 2, 1]] * 16)) == Outcome.REPRODUCED
