"""Claim 4's logic on synthetic result frames: the MPE formula, Table 2's pairs, the verdict rule
(each outcome), the AMP precision per device, the overhead breakdown and the figures' averaging."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from lstmstudy import contract, results
from lstmstudy.claims import frameworks_vs_baseline as claim
from lstmstudy.errors import ParameterError
from lstmstudy.observe import Observation
from lstmstudy.protocols import in_kernel
from lstmstudy.rules import Outcome
from lstmstudy.shapes import LSTMShape

SHAPES = [(h, b, t) for h in (64, 256) for b in (1, 16) for t in (10, 50)]
GPU = dict(hardware_id="cuda-test", kind="cuda")
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def rows(times: dict[tuple[str, str], float], hardware_id: str = "cpu-test", kind: str = "cpu",
         shapes=SHAPES, config: str = "{}", backend: str = "tensorflow",
         created_at: str = "2024-01-01T00:00:00.000000+00:00") -> list[dict]:
    """One ok row per (kernel, precision) and shape; the median is `times[...]` x the shape's size.

    `backend` is the Keras backend the `keras.*` rows record (other rows record '', as `sweep.make_row` does).
    """
    out = []
    for (kernel, precision), factor in times.items():
        for hidden, batch, timesteps in shapes:
            median = factor * 1e-6 * hidden * batch * timesteps
            out.append({"claim": claim.NAME, "kernel": kernel, "framework": kernel.split(".")[0],
                        "backend": backend if kernel.startswith("keras.") else "",
                        "compute_dtype": DTYPES[precision], "created_at": created_at,
                        "device": kind, "device_kind": kind, "hardware_id": hardware_id, "precision": precision,
                        "phase": "inference", "batch": batch, "timesteps": timesteps, "features": hidden,
                        "hidden": hidden, "layers": 1, "bidirectional": False, "config": config,
                        "threads": 2, "n_samples": 3, "median_s": median, "p25_s": median * 0.9,
                        "p75_s": median * 1.1, "samples_s": [median] * 3, "observed_kernel": "test",
                        "status": "ok", "error": ""})
    return out


def both_clocks(times: dict[tuple[str, str], float], **options) -> list[dict]:
    """`rows` per call, and the same timed DeepBench's way (`claim.QUEUED`), where the loop baseline takes torch.raw's
    time: what a set measured since the loop baseline holds."""
    queued = dict(times)
    if ("torch.raw", "fp32") in times:
        queued[(claim.LOOP, "fp32")] = times[("torch.raw", "fp32")]
    return rows(times, **options) + rows(queued, config=claim.QUEUED_TEXT, **options)


def frame(*parts: list[dict]) -> pd.DataFrame:
    data = pd.DataFrame([r for part in parts for r in part])
    data["samples"] = data.pop("samples_s")
    return data


def base_times(fused: float, keras: float) -> dict[tuple[str, str], float]:
    """torch.raw at 1, torch.fused at `fused`, keras.cudnn_auto at `keras` x torch.fused; and the rest."""
    return {("torch.raw", "fp32"): 1.0, ("torch.raw_noinput", "fp32"): 0.8, ("torch.fused", "fp32"): fused,
            ("keras.cudnn_auto", "fp32"): keras * fused, ("keras.impl1", "fp32"): 3 * keras * fused,
            ("keras.impl2", "fp32"): 1.5 * keras * fused}


def test_mpe_is_the_papers_formula():
    # a second kernel 1.53x slower is "about 53% slower": -0.53, as DeepBench vs PyTorch in Table 2
    assert claim.mpe([1.0], [1.53]) == pytest.approx(-0.53)
    # below -1 is reachable (Table 2's -17.75), which dividing by the second time could never give
    assert claim.mpe([1.0, 1.0], [1.0, 36.5]) == pytest.approx(-17.75)
    assert claim.mpe([2.0], [1.0]) == pytest.approx(0.5)  # positive: the second is faster
    assert math.isnan(claim.mpe([], []))


def test_pairs_carry_every_seed_figure_of_table_2():
    by_name = {p.name: p for p in claim.pairs()}
    for first, second, seed in claim.SEED_TABLE2:
        assert by_name[f"{first} vs {second}"].seed_mpe == seed
    assert by_name["DeepBench vs PyTorch AMP"].first == (claim.DEEPBENCH, "fp32")  # the clock's baseline
    assert by_name["DeepBench vs PyTorch AMP"].second == ("torch.fused", claim.AMP)
    assert by_name["DeepBench skip-input vs PyTorch"].first == ("torch.raw_noinput", "fp32")


def claim_verdict(data: pd.DataFrame, hardware_id: str = "cpu-test"):
    """The claim's own verdict on one set (the first of its two; the second is Mode 1 vs Mode 2)."""
    found = [v for v in claim.verdicts(data) if v.hardware_id == hardware_id and v.rule == claim.RULE]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize(("fused", "keras", "outcome"), [
    (1.5, 3.0, Outcome.REPRODUCED),
    (1.05, 3.0, Outcome.PARTLY),       # PyTorch about as fast as the baseline, TensorFlow far slower
    (1.5, 0.8, Outcome.PARTLY),        # PyTorch 50% slower, TensorFlow faster than PyTorch
    (1.5, 1.5, Outcome.PARTLY),        # TensorFlow slower, but not far slower
    (2.5, 3.0, Outcome.PARTLY),        # PyTorch slower than the band
    (1.05, 0.8, Outcome.NOT_REPRODUCED),
])
def test_verdict_rule(fused, keras, outcome):
    verdict = claim_verdict(frame(both_clocks(base_times(fused, keras), **GPU)), GPU["hardware_id"])
    assert verdict.outcome == outcome and verdict.statement == claim.STATEMENT
    assert f"takes {fused:.2f}x" in verdict.ours_text and "cudnn.loop's time, both timed DeepBench's way" in \
        verdict.ours_text
    assert verdict.ours == pytest.approx(fused) and verdict.low == pytest.approx(fused) == verdict.high
    assert [name for name, _, _ in verdict.parts] == ["PyTorch", "TensorFlow"]


@pytest.mark.parametrize(("fused", "keras", "outcome"), [
    (1.5, 3.0, Outcome.REPRODUCED), (1.5, 0.8, Outcome.REPRODUCED),  # TF Mode 0 does not count either way
    (1.05, 3.0, Outcome.NOT_REPRODUCED), (1.24, 3.0, Outcome.NOT_REPRODUCED), (1.26, 0.8, Outcome.REPRODUCED),
])
def test_a_cpu_set_judges_the_pytorch_half_alone(fused, keras, outcome):
    """On a CPU, Keras's default LSTM is TensorFlow's generic loop: its time over oneDNN is claim 1's fallback,
    not framework overhead, so it is context and never decides."""
    verdict = claim_verdict(frame(rows(base_times(fused, keras))))
    assert verdict.outcome == outcome and verdict.statement == claim.PYTORCH_ONLY_CPU
    assert verdict.ours_text.startswith("CPU analogue") and claim.TF_ON_CPU in verdict.ours_text
    assert f"context: {keras:.2f}x" in verdict.ours_text and [n for n, _, _ in verdict.parts] == ["PyTorch"]


def spread(data: pd.DataFrame, kernel: str, by: float) -> pd.DataFrame:
    """`kernel`'s samples spread +-`by` around its median (rounds of one sample each): a wide interval."""
    data = data.copy()
    mask = data.kernel == kernel
    data.loc[mask, "samples"] = pd.Series([list(m * np.linspace(1 - by, 1 + by, 9)) for m in data.median_s[mask]],
                                          index=data.index[mask])
    data.loc[mask, "round_sizes"] = pd.Series([[1] * 9] * int(mask.sum()), index=data.index[mask])
    return data


def test_an_interval_across_a_threshold_is_inconclusive():
    # TensorFlow 2x PyTorch, give or take 40%: far slower or not, the data cannot tell; PyTorch holds
    gpu = GPU["hardware_id"]
    verdict = claim_verdict(spread(frame(both_clocks(base_times(1.5, 2.0), **GPU)), "keras.cudnn_auto", 0.4), gpu)
    assert verdict.outcome == Outcome.INCONCLUSIVE and "undecided" in verdict.ours_text
    # PyTorch fails (as fast as the baseline): partly or not reproduced, whichever way TensorFlow goes
    verdict = claim_verdict(spread(frame(both_clocks(base_times(1.0, 2.0), **GPU)), "keras.cudnn_auto", 0.4), gpu)
    assert verdict.outcome == Outcome.INCONCLUSIVE
    # the interval column shows both intervals that decided, the one that straddles 2x among them
    assert verdict.interval_text.startswith("PyTorch 1-1; TensorFlow ")


KERAS_315 = json.dumps({"torch": "2.11.0+cu130", "keras": "3.15.1"})


def test_keras_on_another_backend_leaves_the_tensorflow_half_unmeasured():
    data = frame(both_clocks(base_times(1.5, 0.8), backend="torch", **GPU)).assign(versions=KERAS_315)
    verdict = claim_verdict(data, GPU["hardware_id"])
    assert verdict.outcome == Outcome.REPRODUCED  # the PyTorch half alone, and the statement says so
    assert verdict.statement.startswith(claim.PYTORCH_ONLY)
    assert verdict.ours_text.endswith("; the TensorFlow half not measured: these Keras rows are Keras 3.15 on its "
                                      "torch backend, not TensorFlow")
    assert [name for name, _, _ in verdict.parts] == ["PyTorch"]


@pytest.mark.parametrize("missing", ["", None])
def test_keras_rows_that_record_no_backend_are_never_judged_as_tensorflow(missing):
    """Keras 3.15 on TensorFlow's rows would decide both halves; the same rows without their backend leave the
    TensorFlow half unmeasured, say why, and are named as what they recorded, never 'TF'."""
    data = frame(both_clocks(base_times(1.5, 3.0), **GPU)).assign(versions=KERAS_315)
    on_tensorflow = claim_verdict(data, GPU["hardware_id"])
    assert [name for name, _, _ in on_tensorflow.parts] == ["PyTorch", "TensorFlow"]
    data.loc[data.kernel.str.startswith("keras."), "backend"] = missing
    verdict = claim_verdict(data, GPU["hardware_id"])
    assert verdict.outcome == Outcome.REPRODUCED and [name for name, _, _ in verdict.parts] == ["PyTorch"]
    assert verdict.statement == claim.PYTORCH_ONLY and "TensorFlow part" not in verdict.ours_text
    assert verdict.ours_text.endswith("the TensorFlow half not measured: these Keras rows are Keras 3.15 (backend not "
                                      "recorded): they do not record which backend ran them, so they cannot stand "
                                      "for TensorFlow")
    assert "Keras 3.15 (backend not recorded), Mode 0 (keras.cudnn_auto)" in set(claim.timed(data).label)
    assert "TF Mode" not in claim.faster_text(data)["cuda"] + claim.glue_texts(data)["cuda_mpe_tf"]
    assert claim.glue_texts(data)["cuda_mpe_tf"].endswith(", Keras 3.15 (backend not recorded))")


def test_a_missing_half_is_not_measured():
    times = base_times(1.5, 3.0)
    del times[("keras.cudnn_auto", "fp32")]
    verdict = claim_verdict(frame(both_clocks(times, **GPU)), GPU["hardware_id"])
    assert verdict.outcome == Outcome.NOT_MEASURED and "keras.cudnn_auto" in verdict.ours_text
    assert claim_verdict(frame(rows(times))).outcome == Outcome.REPRODUCED  # a CPU set never needed it
    times = base_times(1.5, 3.0)
    del times[("torch.raw", "fp32")]
    verdict = claim_verdict(frame(rows(times)))
    assert verdict.outcome == Outcome.NOT_MEASURED and verdict.ours is None


def test_failed_rows_do_not_count():
    data = frame(rows(base_times(1.5, 3.0)))
    data.loc[data.kernel == "torch.raw", "status"] = "error"
    assert claim_verdict(data).outcome == Outcome.NOT_MEASURED


def modes(small: float, large: float, backend: str = "tensorflow", **options) -> pd.DataFrame:
    """keras.impl1 at 1, keras.impl2 at `small` x that at batch 1 and 16, at `large` x at batch 64."""
    small_shapes = [(64, b, 10) for b in (1, 16)]
    return frame(rows({("keras.impl1", "fp32"): 1.0, ("keras.impl2", "fp32"): small}, shapes=small_shapes,
                      backend=backend, **options),
                 rows({("keras.impl1", "fp32"): 1.0, ("keras.impl2", "fp32"): large}, shapes=[(64, 64, 10)],
                      backend=backend, **options))


@pytest.mark.parametrize(("small", "large", "outcome"), [
    (1.5, 0.5, Outcome.REPRODUCED),      # Mode 1 faster up to batch 16, Mode 2 faster above
    (0.5, 0.5, Outcome.NOT_REPRODUCED),  # Mode 2 faster everywhere: no crossover, as claim 2 rules a GPU faster
    (1.5, 1.5, Outcome.PARTLY),          # Mode 1 faster everywhere
    (0.5, 1.5, Outcome.NOT_REPRODUCED),  # the reverse
])
def test_mode_1_against_mode_2(small, large, outcome):
    (verdict,) = [v for v in claim.verdicts(modes(small, large)) if v.rule == claim.IMPL_RULE]
    assert verdict.outcome == outcome and verdict.ours == pytest.approx(small)
    assert verdict.statement.startswith("TF Mode 1") and verdict.seed_figure == claim.IMPL_SEED
    assert verdict.ours_text.endswith("(Keras on its tensorflow backend, CPU analogue: Keras generic loops on a CPU; "
                                      "timed per call: a CPU runs each call to its end before the next starts, so a "
                                      "queue hides no launch cost)")
    (other,) = [v for v in claim.verdicts(modes(small, large, backend="torch")) if v.rule == claim.IMPL_RULE]
    assert "(Keras on its torch backend, CPU analogue" in other.ours_text and other.outcome == outcome


@pytest.mark.parametrize(("small", "large", "outcome"), [
    (1.5, 0.5, Outcome.REPRODUCED), (0.5, 0.5, Outcome.NOT_REPRODUCED), (1.5, 1.5, Outcome.PARTLY)])
def test_a_gpu_set_decides_mode_1_against_mode_2_on_queued_rows_alone(small, large, outcome):
    """As the claim's PyTorch half: a GPU set's per-call rows of the two modes are context, and the verdict awaits
    their queued rows; with them, it decides on those, whatever the per-call rows say."""
    options = dict(backend="torch", **GPU)
    per_call = modes(1 / small, 1 / large, **options).assign(versions=KERAS_315)  # the queued rows reversed
    (awaits,) = [v for v in claim.verdicts(per_call) if v.rule == claim.IMPL_RULE]
    assert awaits.outcome == Outcome.NOT_MEASURED and awaits.ours is None and not awaits.parts
    assert awaits.ours_text.startswith("awaits queued rows of keras.impl1 and keras.impl2")
    assert f"Context, per call (Keras 3.15 on its torch backend), not deciding: batch <= 16: Mode 2 takes " \
           f"{1 / small:.2f}x" in awaits.ours_text and "part (i)" not in awaits.ours_text
    queued = modes(small, large, **options).assign(config=claim.QUEUED_TEXT)
    (decided,) = [v for v in claim.verdicts(pd.concat([per_call, queued], ignore_index=True))
                  if v.rule == claim.IMPL_RULE]
    assert decided.outcome == outcome and decided.ours == pytest.approx(small)
    assert decided.ours_text.endswith("(Keras 3.15 on its torch backend; timed queued)")


def test_mode_1_against_mode_2_needs_both_sides_of_batch_16():
    data = frame(rows({("keras.impl1", "fp32"): 1.0, ("keras.impl2", "fp32"): 2.0}))  # batch 1 and 16 only
    (verdict,) = [v for v in claim.verdicts(data) if v.rule == claim.IMPL_RULE]
    assert verdict.outcome == Outcome.NOT_MEASURED


def test_table2_resolves_amp_per_device_and_keeps_sets_apart():
    cpu = base_times(1.5, 3.0) | {("torch.fused", "bf16"): 0.75, ("keras.cudnn_auto", "bf16"): 9.0}
    gpu = base_times(1.2, 20.0) | {("torch.fused", "fp16"): 0.6, ("torch.fused", "bf16"): 99.0}
    data = frame(rows(cpu), rows(gpu, hardware_id="cuda-test", kind="cuda"))
    table = claim.table2(data).set_index(["pair", "hardware_id"])
    assert table.loc[("DeepBench vs PyTorch", "cpu-test"), "our MPE"] == pytest.approx(-0.5)
    assert table.loc[("DeepBench vs PyTorch", "cuda-test"), "our MPE"] == pytest.approx(-0.2)
    assert table.loc[("PyTorch vs PyTorch AMP", "cpu-test"), "second (ours)"] == "torch.fused@bf16"
    assert table.loc[("PyTorch vs PyTorch AMP", "cpu-test"), "our MPE"] == pytest.approx(0.5)
    assert table.loc[("PyTorch vs PyTorch AMP", "cuda-test"), "second (ours)"] == "torch.fused@fp16"
    assert table.loc[("PyTorch vs PyTorch AMP", "cuda-test"), "our MPE"] == pytest.approx(0.5)
    assert table.loc[("TF Mode 0 vs TF Mode 1", "cpu-test"), "our MPE"] == pytest.approx(-2.0)
    assert table.loc[("TF Mode 0 vs TF Mode 0 AMP", "cuda-test"), "configurations"] == 0  # no fp16 Keras rows
    assert math.isnan(table.loc[("TF Mode 0 vs TF Mode 0 AMP", "cuda-test"), "our MPE"])
    wide = claim.table2_wide(data)
    assert list(wide.pair) == [p.name for p in claim.pairs()]
    assert "our MPE [cuda-test]" in wide.columns


def test_faster_text_names_the_faster_framework_per_device():
    data = frame(rows(base_times(1.5, 3.0)), rows(base_times(1.5, 0.5), hardware_id="cuda-test", kind="cuda"))
    texts = claim.faster_text(data)
    assert texts["cpu"].startswith("PyTorch is faster")
    assert texts["cuda"].startswith("TensorFlow is faster")
    assert claim.faster_text(frame(rows(base_times(1.5, 3.0))))["cuda"] == "not measured"
    assert "TF Mode 0 (keras.cudnn_auto)" in texts["cuda"]


def test_the_prose_gives_every_sets_figure_and_only_the_verdicts():
    """One figure, one estimator: the page's texts name every stored set, a framework's time over another's is the
    figure the verdict gives (its estimator and interval), and an MPE text computes no second ratio beside it."""
    data = frame(rows(base_times(1.5, 3.0)), rows(base_times(1.2, 2.5), hardware_id="cpu-other"),
                 rows(base_times(2.0, 1.5), backend="torch", **GPU)).assign(observed_detail="")
    texts = claim.glue_texts(data)
    verdicts = [v for v in claim.verdicts(data) if v.rule == claim.RULE]
    for v in verdicts:
        kind = "cuda" if v.hardware_id.startswith("cuda-") else "cpu"
        assert f" on {v.hardware_id} " in texts[f"{kind}_mpe_pytorch"] and v.hardware_id in texts[f"{kind}_faster"]
    for v in verdicts[:2]:  # a CPU verdict gives Keras over torch.fused as context: the faster text's figure
        context = v.ours_text.split("(context: ")[1].removesuffix(" torch.fused)")
        assert f"takes {context} the time of PyTorch" in texts["cpu_faster"]
    assert texts["cpu_mpe_pytorch"] == ("-0.20 on cpu-other (8 configurations, torch.raw per call); "
                                        "-0.50 on cpu-test (8 configurations, torch.raw per call)")
    for key in ("mpe_pytorch", "mpe_tf"):
        assert not re.search(r"\d\.\d+x", texts[f"cpu_{key}"] + texts[f"cuda_{key}"])  # no ratio beside the MPE
    assert texts["cuda_mpe_tf"].endswith("configurations, torch.raw per call, Keras on its torch backend)")
    assert "Keras on" not in texts["cuda_mpe_pytorch"] + texts["cpu_mpe_tf"]


def test_the_page_glues_one_figure_for_the_slowdown_and_every_sets_texts():
    """The page's prose names the sets in the plural and leaves the slowdown to the verdict's figure; and what it says
    a GPU set can settle holds for the GPU set stored (its Keras ran on torch)."""
    page = Path(__file__).resolve().parent.parent / "book" / "claims" / f"{claim.CLAIM.stem}.ipynb"
    markdown = " ".join(" ".join("".join(c["source"]).split()) for c in json.loads(page.read_text())["cells"]
                        if c["cell_type"] == "markdown")
    assert "{glue:text}`c04_cpu_mpe_pytorch` on the CPU sets" in markdown and "On the CPU set," not in markdown
    assert "is each set's verdict above, the one figure this page gives for it" in markdown
    assert "a GPU set of ours can settle it" not in markdown and "once a GPU set holds" not in markdown


def test_keras_on_the_torch_backend_is_never_called_tensorflow():
    assert claim.label("keras.cudnn_auto", "fp32") == "TF Mode 0 (keras.cudnn_auto)"
    assert (claim.label("keras.impl1", "fp32", backend="torch", versions=KERAS_315)
            == "Keras 3.15 on its torch backend, Mode 1 (keras.impl1)")
    assert (claim.label("keras.cudnn_auto", "bf16", backend="torch")
            == "Keras on its torch backend, Mode 0 AMP bf16 (keras.cudnn_auto)")  # no release recorded
    assert claim.label("keras.impl2", "fp32", backend="") == "Keras (backend not recorded), Mode 2 (keras.impl2)"
    assert claim.label("torch.fused", "fp32", backend="torch") == "PyTorch (torch.fused)"
    data = frame(rows(base_times(1.5, 0.5), hardware_id="cuda-test", kind="cuda", backend="torch"))
    data = data.assign(versions=KERAS_315)
    text = claim.faster_text(data)["cuda"]
    assert text.startswith("Keras 3.15 on its torch backend is faster")
    assert "Keras 3.15 on its torch backend, Mode 0 (keras.cudnn_auto) takes" in text
    assert "the time of PyTorch 2.11 (torch.fused)" in text
    assert "TensorFlow" not in text and "TF Mode" not in text
    assert claim.label("keras.cudnn_auto", "fp32", "torch", KERAS_315) in set(claim.timed(data).label)


def test_a_set_measured_on_two_keras_backends_keeps_the_newer():
    old = rows({("keras.cudnn_auto", "fp32"): 3.0}, backend="tensorflow", created_at="2024-01-01T00:00:00+00:00")
    new = rows({("keras.cudnn_auto", "fp32"): 6.0}, backend="torch", created_at="2024-02-01T00:00:00+00:00")
    base = rows({("torch.fused", "fp32"): 1.0})
    table = claim.ratio(frame(base, old, new), "keras.cudnn_auto", "torch.fused")
    assert table.ratio.tolist() == pytest.approx([6.0]) and table.n.tolist() == [len(SHAPES)]
    assert claim.faster_text(frame(base, old, new))["cpu"].startswith("PyTorch is faster")
    assert "Keras on its torch backend, Mode 0" in claim.faster_text(frame(base, old, new))["cpu"]


def stored_overhead(root, inside: dict[str, float], profiled_as: dict[str, str] | None = None,
                    slowdown: float = 1.0) -> pd.DataFrame:
    """The grid's rows (torch.raw 1.0, torch.fused 2.0) and profiler rows at the `inside` factors, through the
    store (so the config text is what a sweep writes), loaded. A profiler row's sessions took its own kernel's
    grid time per call, or that of `profiled_as[kernel]`, times the profiler's `slowdown`."""
    shape = [SHAPES[0]]
    wall = rows({("torch.raw", "fp32"): 1.0, ("torch.fused", "fp32"): 2.0}, shapes=shape)
    profiled = rows({(kernel, "fp32"): factor for kernel, factor in inside.items()}, shapes=shape,
                    config=results.config_text(claim.IN_KERNEL))
    wall_ms = {row["kernel"]: row["median_s"] * 1e3 for row in wall}
    for row in profiled:  # the profiled sessions' own wall time per call, which the share divides by
        kernel = (profiled_as or {}).get(row["kernel"], row["kernel"])
        row["observed_detail"] = json.dumps({"kernels": ["aten::mkldnn_rnn_layer"],
                                             "profiled_wall_ms_per_call": wall_ms[kernel] * slowdown})
    for row in wall + profiled:
        results.append(claim.NAME, row["hardware_id"], [row], root)
    return results.load(claim.NAME, root)


def test_overhead_joins_profiler_rows_with_wall_times(tmp_path):
    data = stored_overhead(tmp_path, {"torch.raw": 0.9, "torch.fused": 0.95})
    table = claim.overhead(data).set_index("kernel")
    assert table.loc["torch.fused", "in-kernel share"] == pytest.approx(0.475)
    assert table.loc["torch.raw", "in-kernel share"] == pytest.approx(0.9)
    text = claim.overhead_text(data)["cpu"]
    assert "2.00x torch.raw's wall time" in text and "1.06x its time inside the kernel" in text
    # the profiler rows never enter the timed comparisons
    assert len(claim.timed(data)) == 2


def test_the_profilers_own_cost_is_shown_beside_the_share_it_distorts(tmp_path):
    data = stored_overhead(tmp_path, {"torch.raw": 0.9, "torch.fused": 0.95}, slowdown=5.0)
    table = claim.overhead(data).set_index("kernel")
    assert table.loc["torch.fused", "profiler slowdown"] == pytest.approx(5.0)
    assert table.loc["torch.fused", "in-kernel share"] == pytest.approx(0.095)  # 0.95 / (2.0 x 5)
    assert table.loc["torch.fused", "share without the profiler"] == pytest.approx(0.475)  # 0.95 / 2.0
    text = claim.overhead_text(data)["cpu"]
    assert "makes each call 5.0x and 5.0x slower" in text and "that would be 48% and 90%" in text


def test_an_impossible_share_is_never_shown(tmp_path):
    data = stored_overhead(tmp_path, {"torch.raw": 2.63, "torch.fused": 0.95}, profiled_as={"torch.fused": "torch.raw"})
    table = claim.overhead(data).set_index("kernel")
    assert table["in-kernel share"].dropna().le(1).all() and np.isnan(table.loc["torch.raw", "in-kernel share"])
    assert "impossible share 263% left out" in table.loc["torch.raw", "what the profiler saw"]
    assert claim.overhead_text(data)["cpu"].startswith("not measured")


def test_a_profiled_session_above_its_wall_time_is_an_error_row(monkeypatch):
    seen = Observation("onednn", {"profiled_wall_s": [1e-3, 1e-3]})
    monkeypatch.setattr(in_kernel, "time_inside", lambda *a, **k: ([0.5e-3, 1.2e-3], seen))
    point = contract.Point("torch.fused", LSTMShape(batch=1, timesteps=4, features=8, hidden=8), config=claim.IN_KERNEL)
    with pytest.raises(in_kernel.ImpossibleShare, match="120% of a session's wall time"):
        in_kernel.prepare(point, torch.device("cpu"), profiled=claim.IN_KERNEL, sessions=2)


def test_grid_quick_and_amp_precision():
    points = claim.grid(kind="cpu", quick=True, hiddens=[32, 64], batches=[2, 4], timesteps=[20, 40])
    timed_points = [p for p in points if not p.config]
    assert {p.shape.hidden for p in points} == {32} and {p.shape.timesteps for p in points} == {8}
    assert all(p.shape.features == p.shape.hidden for p in points)
    assert {p.precision for p in timed_points} == {"fp32", "bf16"}
    assert {p.kernel for p in timed_points if p.precision == "bf16"} == set(claim.DEFAULT_AMP_KERNELS)
    assert sorted(p.kernel for p in points if dict(p.config) == claim.IN_KERNEL) == sorted(claim.PROFILED)
    # every queued kernel also timed DeepBench's way, at every precision it has, and the loop baseline (fp32) queued
    queued = {(p.kernel, p.precision) for p in points if dict(p.config) == claim.QUEUED}
    assert queued == {(p.kernel, p.precision) for p in timed_points} | {(claim.LOOP, "fp32")}
    assert claim.LOOP not in {p.kernel for p in timed_points}  # DeepBench's call is only ever timed DeepBench's way
    cut = claim.grid(kind="cpu", quick=True, hiddens=[32], batches=[2], timesteps=[20],
                     queued_kernels=["torch.fused", claim.LOOP])
    assert {(p.kernel, p.precision) for p in cut if dict(p.config) == claim.QUEUED} == {
        ("torch.fused", "fp32"), ("torch.fused", "bf16"), (claim.LOOP, "fp32")}
    full = claim.grid(kind="cpu", quick=False, hiddens=[32, 64], batches=[2, 4], timesteps=[20, 40])
    profiled = {(p.shape.hidden, p.shape.batch, p.shape.timesteps) for p in full if dict(p.config) == claim.IN_KERNEL}
    assert profiled == {(32, 2, 20), (64, 4, 40)}
    # the AMP points follow the device kind asked for, not the machine the grid is built on
    gpu = claim.grid(kind="cuda", quick=True, hiddens=[32, 64], batches=[2, 4], timesteps=[20, 40])
    assert {p.precision for p in gpu if not p.config} == {"fp32", "fp16"}
    assert claim.amp_precision("cuda") == "fp16" and claim.amp_precision("cpu") == "bf16"


@pytest.mark.parametrize("bad", [dict(hiddens=[0]), dict(batches=[]), dict(timesteps=[2.5]),
                                 dict(kernel_names=["torch.native"]), dict(amp_kernels=["keras.relu"]),
                                 dict(device="cpu")])  # the old grid's argument: the kind is not a parameter
def test_bad_parameters_name_themselves(bad):
    name = next(iter(bad))
    with pytest.raises(ParameterError, match=f"'{name}'"):
        claim.CLAIM.parameters("cpu", **bad)


def test_paper_figure_averages_over_common_configurations():
    times = base_times(1.5, 3.0)
    data = frame(rows(times))
    data = data[~((data.kernel == "keras.impl1") & (data.hidden == 256))]  # one kernel lacks hidden 256
    fig = claim.paper_figure(data, "batch")
    panel = fig[fig.figure.str.startswith("all kernels")]
    raw = panel[panel.label == claim.label("torch.raw", "fp32")].set_index("batch").median_s
    # mean over hidden 64 only (the configurations every plotted kernel has) and both timesteps
    assert raw[1] == pytest.approx(1e-6 * 64 * 1 * (10 + 50) / 2)
    other = fig[fig.figure.str.startswith("PyTorch")]
    assert claim.label("keras.impl1", "fp32") not in set(other.label)


def test_table2_compact_puts_the_outcome_first_and_keeps_every_pair():
    """The page's Table 2 in view: one row per pair, whether our MPE has the paper's sign first, figures rounded."""
    data = frame(rows(base_times(1.5, 3.0)))
    view = claim.table2_view(data)
    assert list(view.columns[:2]) == ["pair", "our MPE has the paper's sign"]
    assert list(view.pair) == [p.name for p in claim.pairs()]
    assert view["our MPE has the paper's sign"].iloc[-1] == "not in the paper"


def with_device_time(data: pd.DataFrame, inside: dict[str, float]) -> pd.DataFrame:
    """`data` with each row's device time (the GPU's own work per call): `inside[kernel]` x its shape's size, as
    `rows` sizes its wall time."""
    return data.assign(device_s=data.kernel.map(inside) * 1e-6 * data.hidden * data.batch * data.timesteps)


#: each kernel's time inside its kernels per size: torch.fused and Keras's Mode 0 run the baseline's cuDNN kernels
INSIDE = {"torch.raw": 0.5, claim.LOOP: 0.5, "torch.raw_noinput": 0.4, "torch.fused": 0.5, "keras.cudnn_auto": 0.5,
          "keras.impl1": 2.0, "keras.impl2": 1.0}


def test_the_overhead_split_reads_the_gpus_own_work_beside_the_wall_time():
    """torch.fused takes 1.5x the loop baseline's wall time but the same time inside the kernels: the whole gap is
    host-side, per set (`split`, the page's table) and in its words; the outcome is the same without device time."""
    data = frame(both_clocks(base_times(1.5, 3.0), **GPU))
    timed = with_device_time(data, INSIDE)
    verdict = claim_verdict(timed, "cuda-test")
    assert (verdict.outcome, verdict.ours) == (claim_verdict(data, "cuda-test").outcome,
                                               claim_verdict(data, "cuda-test").ours)
    assert "inside the kernels (the profiler, 8 configurations) 1.00x against 1.50x in wall time" in verdict.ours_text
    split = claim.split(timed).set_index("pair")
    fused = split.loc[f"torch.fused over {claim.LOOP}"]
    assert fused.clock == claim.QUEUED_CLOCK and fused["configurations with in-kernel time"] == 8
    assert (fused["wall ratio"], fused["in-kernel ratio"], fused["host-side share of the gap"]) == pytest.approx(
        (1.5, 1.0, 1.0))
    assert split.loc["keras.impl1 over keras.impl2", "in-kernel ratio"] == pytest.approx(2.0)
    assert "1.00x inside the kernels against 1.50x in wall time over 8 configurations" in \
        claim.host_side_text(timed)["cuda"]


def test_a_rows_device_time_comes_before_the_profiled_pass_in_its_detail():
    """A GPU row's device time is the time inside its kernels; a CPU row, which has none, keeps its oneDNN op's."""
    detail = json.dumps({"in_kernel_ms": 99.0})
    gpu = claim.timed(with_device_time(frame(rows(base_times(1.5, 3.0), **GPU)), INSIDE).assign(
        observed_detail=detail), clock=None)
    assert (gpu.in_kernel_s == gpu.device_s).all()
    cpu = claim.timed(frame(rows(base_times(1.5, 3.0))).assign(observed_detail=detail, device_s=np.nan), clock=None)
    assert cpu.in_kernel_s.tolist() == pytest.approx([0.099] * len(cpu))


def test_gpu_rows_without_device_time_read_not_recorded():
    """The first H100 set's rows, and any GPU rows stored before device time was, have no split: the page says it
    was not recorded, and falls back on the profiler's rows where the set has them."""
    from lstmstudy import notebook

    bare = frame(both_clocks(base_times(1.5, 3.0), **GPU)).assign(observed_detail="")
    split = claim.split(bare)
    assert split["in-kernel ratio"].isna().all() and (split["configurations with in-kernel time"] == 0).all()
    assert set(notebook.shown(split, "", default="not recorded")["in-kernel ratio"]) == {"not recorded"}
    assert claim.host_side_text(bare)["cuda"] == "on cuda-test, device time not recorded"
    stored = results.load(claim.NAME, sets="cuda-h100-80gb-hbm3-2a1d35")
    assert ("torch.fused over torch.raw per call (the profiler's rows; the grid's rows: device time not recorded)"
            in claim.host_side_text(stored)["cuda"])
    assert claim.split(stored)["in-kernel ratio"].isna().all()
