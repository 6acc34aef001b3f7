"""Claim 1's verdict is decided in training, the phase the seeds timed, on intervals over configurations and
samples, with two-sided bands that span both seeds' figures (Chollet's 2-5x, the Q&A's 15x). On a GPU each seed case
(the blog's ReLU layer and model, Chollet's recurrent dropout, the Q&A's generic LSTM) is a part of its own, per Keras
backend, named with the Keras release and backend its rows ran on; on a CPU the analogue is oneDNN against ATen."""

from __future__ import annotations

import json
import re
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lstmstudy import results
from lstmstudy.claims import cudnn_fallback as claim
from lstmstudy.frameworks import framework_words
from lstmstudy.rules import CPU_ANALOGUE, GPU, Bands, Outcome

DRIFT = np.array([1.0, 1.3, 0.9, 1.2, 1.1])  # the rounds a group was timed in
KERAS_315 = json.dumps({"torch": "2.11.0+cu130", "keras": "3.15.1", "jax": "0.11.2"})


def timed(hardware_id: str, kernel: str, batch: int, seconds: float, *, rng: np.random.Generator,
          phase: str = "train", spread: float = 0.01, backend: str | None = None, config: str = "{}",
          versions: str | None = KERAS_315, detail: str = "") -> dict:
    """One stored row of `kernel` at one configuration (told apart by `batch`), timed in 5 interleaved rounds of
    10 samples (round seed `batch`: rows of one configuration were timed together), each sample scattered by
    `spread` (a fraction) around its round's time. `backend`: the Keras backend a keras.* row records (torch)."""
    samples = np.concatenate([seconds * d * (1 + spread * rng.standard_normal(10)) for d in DRIFT])
    if backend is None:
        backend = "torch" if kernel.startswith("keras.") else ""
    return {"hardware_id": hardware_id, "kernel": kernel, "backend": backend, "phase": phase, "precision": "fp32",
            "batch": batch, "timesteps": 32, "features": 32, "hidden": 64, "layers": 1, "bidirectional": False,
            "config": config, "status": "ok", "samples": samples.tolist(), "round_sizes": [10] * 5,
            "round_seed": batch, "noisy": False, "median_s": float(np.median(samples)), "versions": versions,
            "observed_detail": detail}


def rows(hardware_id: str, slowdowns: list[float], *, spread: float = 0.01, seed: int = 0, phase: str = "train",
         pair: tuple[str, str] = ("torch.fused", "torch.native"), **options) -> list[dict]:
    """`pair`'s fallback over its fused kernel at one configuration per slowdown."""
    rng = np.random.default_rng(seed)
    return [timed(hardware_id, kernel, batch, seconds, rng=rng, phase=phase, spread=spread, **options)
            for batch, slowdown in enumerate(slowdowns, start=1)
            for kernel, seconds in ((pair[0], 1e-3), (pair[1], 1e-3 * slowdown))]


def seed_cases(hardware_id: str, cases: dict[str, list[float]], *, base: float = 1e-3, seed: int = 0,
               phase: str = "train", **options) -> list[dict]:
    """A GPU set's seed cases: each Keras trigger of `cases` over one `keras.cudnn_auto` row per configuration
    (its slowdown per configuration), and the blog's model (`claim.BLOG_KERNEL`: [its one slowdown])."""
    rng = np.random.default_rng(seed)
    grid = {kernel: s for kernel, s in cases.items() if kernel != claim.BLOG_KERNEL}
    out = []
    for batch in range(1, 1 + max((len(s) for s in grid.values()), default=0)):
        out.append(timed(hardware_id, "keras.cudnn_auto", batch, base, rng=rng, phase=phase, **options))
        out += [timed(hardware_id, kernel, batch, base * s[batch - 1], rng=rng, phase=phase, **options)
                for kernel, s in grid.items() if batch <= len(s)]
    if blog := cases.get(claim.BLOG_KERNEL):
        out += [timed(hardware_id, claim.BLOG_KERNEL, 1, 1e-2 * (blog[0] if act == "leaky_relu" else 1.0), rng=rng,
                      phase=phase, config=json.dumps({"activation": act}), **options)
                for act in claim.BLOG_ACTIVATIONS]
    return out


H100_LIKE = {"keras.relu": [6.0, 6.5, 7.0, 6.2], claim.BLOG_KERNEL: [3.6],
             "keras.recurrent_dropout": [24.0, 25.0, 26.0, 23.0], "keras.generic": [10.0, 11.0, 10.5, 11.5]}


def verdict(hardware_id: str, slowdowns: list[float], **options):
    (found,) = claim.verdicts(pd.DataFrame(rows(hardware_id, slowdowns, **options)))
    return found


def gpu_verdict(cases: dict[str, list[float]], extra: list[dict] = (), **options):
    (found,) = claim.verdicts(pd.DataFrame(seed_cases("cuda-h100-test", cases, **options) + list(extra)))
    return found


# --- on a GPU: the seeds' own cases decide, each named with its Keras backend ----------------------------------

def test_each_seed_case_is_a_part_of_the_gpu_verdict():
    found = gpu_verdict(H100_LIKE)
    assert found.evidence == GPU and found.counts and found.outcome == Outcome.REPRODUCED  # one case exceeds
    assert [name for name, _, _ in found.parts] == [
        f"{case} (Keras 3.15 on its torch backend)" for case in ("ReLU", "blog model", "recurrent dropout",
                                                                 "generic LSTM")]
    assert found.ours is None and found.brief == found.interval_text
    text = found.ours_text
    assert text.startswith("Keras 3.15 on its torch backend (eager: where cuDNN is lost, a Python loop of single ops")
    for words in ("the blog's ReLU layer (activation='relu') 6.4",
                  "the blog's own model (LeakyReLU(0.05) over tanh) 3.",
                  "Chollet's recurrent dropout (recurrent_dropout=0.2) 24.",
                  "the Q&A's generic LSTM against the cuDNN one (use_cudnn=False) 10."):
        assert words in text, words
    assert (": exceeds the seed, above the Q&A's 15x (Keras 3.15.1 forces implementation=1 whenever it is set "
            "(`if self.recurrent_dropout != 0.0: self.implementation = 1`, keras/src/layers/rnn/lstm.py lines "
            "136-137))") in text
    assert claim.recurrent_dropout_forces() in claim.recurrent_dropout_source()  # one spelling of the source line
    relu = text.index("ReLU layer")
    assert relu < text.index("own model") < text.index("Chollet's recurrent") < text.index("Q&A's generic")


@pytest.mark.parametrize("backend", ["torch", "jax", "tensorflow"])
def test_a_gpu_verdict_names_the_keras_backend_its_rows_ran_on(backend):
    """The backend comes from the rows (each records it, as its run's fingerprint does): never assumed."""
    found = gpu_verdict(H100_LIKE, backend=backend)
    assert found.ours_text.startswith(f"Keras 3.15 on its {backend} backend (")
    assert all(name.endswith(f"(Keras 3.15 on its {backend} backend)") for name, _, _ in found.parts)
    assert claim.BACKEND_NOTES[backend] in found.ours_text
    other = {"torch", "jax", "tensorflow"} - {backend}
    assert not any(f"on its {name} backend" in found.ours_text for name in other)


def test_a_gpu_verdict_without_the_backend_or_release_recorded_says_so():
    found = gpu_verdict({"keras.relu": [6.0, 6.5]}, backend="", versions=None)
    assert found.ours_text.startswith("Keras (backend not recorded), in training: the blog's ReLU layer")
    assert found.parts[0][0] == "ReLU (Keras (backend not recorded))"  # nor a release


def test_jax_and_torch_rows_are_each_compared_with_their_own_backends_cudnn_kernel():
    """Both backends' rows in one set: a ratio pairs rows of one backend only, and each backend is a part."""
    torch_rows = seed_cases("cuda-h100-test", {"keras.relu": [6.0, 6.2]}, backend="torch")
    jax_rows = seed_cases("cuda-h100-test", {"keras.relu": [2.5, 2.6]}, base=3e-3, seed=1, backend="jax")
    (found,) = claim.verdicts(pd.DataFrame(torch_rows + jax_rows))
    assert [name for name, _, _ in found.parts] == ["ReLU (Keras 3.15 on its jax backend)",
                                                    "ReLU (Keras 3.15 on its torch backend)"]
    (jax_low, jax_high), (torch_low, torch_high) = ((low, high) for _, low, high in found.parts)
    assert 2.3 < jax_low < jax_high < 2.8 and 5.8 < torch_low < torch_high < 6.4  # never 6x over 3x baselines
    assert "Keras 3.15 on its jax backend (jax 0.11, XLA-compiled" in found.ours_text
    assert "Keras 3.15 on its torch backend (eager" in found.ours_text
    assert found.outcome == Outcome.REPRODUCED
    summary = claim.summary(claim.slowdowns(pd.DataFrame(torch_rows + jax_rows)))
    assert sorted(summary.label) == ["keras.relu on jax", "keras.relu on torch"]


@pytest.mark.parametrize(("cases", "outcome"), [
    ({"keras.relu": [3.0, 3.2], "keras.recurrent_dropout": [8.0, 8.4]}, Outcome.REPRODUCED),
    ({"keras.relu": [3.0, 3.2], "keras.recurrent_dropout": [40.0, 42.0]}, Outcome.REPRODUCED),  # one exceeds
    ({"keras.relu": [30.0, 32.0], "keras.recurrent_dropout": [40.0, 42.0]}, Outcome.EXCEEDS),  # all exceed
    ({"keras.relu": [1.0, 1.05], "keras.recurrent_dropout": [0.95, 1.0]}, Outcome.NOT_REPRODUCED),
    ({"keras.relu": [1.0, 1.05], "keras.recurrent_dropout": [3.0, 3.2]}, Outcome.PARTLY),  # one holds, one fails
    ({"keras.relu": [1.6, 1.7], "keras.recurrent_dropout": [3.0, 3.2]}, Outcome.PARTLY),
    # an undecided case (1.6-2.6 straddles 2x) decides nothing where either way gives the same: partly
    ({"keras.relu": [1.6, 1.7], "keras.generic": [1.6, 2.6, 1.7, 2.5], "keras.recurrent_dropout": [3.0, 3.2]},
     Outcome.PARTLY),
    # ... and makes the set inconclusive where it matters: reproduced or partly
    ({"keras.relu": [3.0, 3.2], "keras.generic": [1.6, 2.6, 1.7, 2.5]}, Outcome.INCONCLUSIVE),
])
def test_the_seed_cases_combine_as_the_rule_says(cases, outcome):
    assert gpu_verdict(cases).outcome == outcome


def test_each_case_is_decided_by_the_same_bands_on_its_own_interval():
    found = gpu_verdict({"keras.relu": [1.6, 2.6, 1.7, 2.5], "keras.recurrent_dropout": [3.0, 3.2, 2.8, 3.1]})
    (_, relu_low, relu_high), (_, dropout_low, dropout_high) = found.parts
    assert claim.BANDS.decide(relu_low, relu_high) == Outcome.INCONCLUSIVE
    assert claim.BANDS.decide(dropout_low, dropout_high) == Outcome.REPRODUCED
    assert "(activation='relu') 2.0" in found.ours_text and ": inconclusive, across Chollet's 2x" in found.ours_text


def test_the_pooled_mean_and_pytorch_are_context_never_deciding():
    """PyTorch's generic loop at 40x would exceed the seeds: it is shown beside, with the pooled geometric mean
    that decided before, and the seeds' Keras cases decide."""
    torch_rows = rows("cuda-h100-test", [40.0, 42.0], seed=3)
    found = gpu_verdict({"keras.relu": [3.0, 3.2], "keras.recurrent_dropout": [3.1, 3.3]}, extra=torch_rows)
    assert found.outcome == Outcome.REPRODUCED and len(found.parts) == 2
    beside = found.ours_text.split("; beside, not deciding: ", 1)[1]
    assert "every other trigger in training: PyTorch 2.11: vendor kernel disabled (cuDNN on GPU, oneDNN on CPU) " \
           "4" in beside
    assert re.search(r"the geometric mean pooled over 6 configurations of keras.recurrent_dropout, keras.relu and "
                     r"torch.native \d+\.\d\dx \(95% interval", beside)


def test_training_decides_and_inference_stands_beside_it():
    """The seeds timed training ("model training time", one epoch): inference that alone would say 'not
    reproduced' is shown beside the verdict, not mixed into it."""
    data = pd.DataFrame(seed_cases("cuda-h100-test", {"keras.relu": [3.0, 3.2, 2.8, 3.1]})
                        + seed_cases("cuda-h100-test", {"keras.relu": [1.0, 1.05, 0.95, 1.0]}, phase="inference"))
    (found,) = claim.verdicts(data)
    assert found.outcome == Outcome.REPRODUCED and len(found.parts) == 1
    assert "in training: the blog's ReLU layer (activation='relu') 3.0" in found.ours_text
    assert "within Chollet's 2-5x" in found.ours_text
    assert "; beside, not deciding: in inference: ReLU 1.0" in found.ours_text


def test_a_case_the_set_did_not_measure_is_named_and_decides_nothing():
    found = gpu_verdict({"keras.relu": [3.0, 3.2], "keras.recurrent_dropout": [3.1, 3.3]})
    assert found.outcome == Outcome.REPRODUCED
    assert ("not measured on this set, deciding nothing: the blog's own model (LeakyReLU(0.05) over tanh), the "
            "Q&A's generic LSTM against the cuDNN one (use_cudnn=False)") in found.ours_text


def test_a_gpu_set_without_any_seed_case_in_training_is_not_measured():
    only_torch = verdict("cuda-h100-test", [3.0, 3.2])
    assert only_torch.outcome == Outcome.NOT_MEASURED and not only_torch.counts
    assert only_torch.ours_text.startswith("not measured in train: none of the seeds' own cases (the blog's ReLU")
    only_inference = gpu_verdict({"keras.relu": [3.0, 3.2]}, phase="inference")
    assert only_inference.outcome == Outcome.NOT_MEASURED and "in inference: ReLU 3." in only_inference.ours_text


def test_a_gpu_set_of_the_blog_model_alone_is_decided_on_it():
    found = gpu_verdict({claim.BLOG_KERNEL: [3.6]})
    assert found.outcome == Outcome.REPRODUCED and [name for name, _, _ in found.parts] == [
        "blog model (Keras 3.15 on its torch backend)"]


def test_the_blog_models_slowdown_pairs_its_two_activations():
    data = pd.DataFrame(seed_cases("cuda-h100-test", {claim.BLOG_KERNEL: [3.6]}))
    (row,) = claim.blog_slowdowns(data).itertuples()
    assert row.ratio == pytest.approx(3.6, rel=0.02) and row.ratio_lo < row.ratio < row.ratio_hi
    assert row.backend == "torch"
    (table,) = claim.blog_table(data).itertuples()
    assert table.backend == "torch" and table.slowdown == pytest.approx(3.6, rel=0.02)


# --- why recurrent dropout costs what it does on Keras 3 ---------------------------------------------------------

def test_the_quoted_keras_lines_are_in_the_installed_keras():
    """The page quotes Keras's own source for recurrent dropout's cost: the lines must be what this Keras holds at
    those line numbers where it is the quoted release, and still hold the statements where it is another."""
    import keras

    version, relative = claim.KERAS_SOURCE
    source = (Path(keras.__file__).parent / relative.removeprefix("keras/")).read_text().splitlines()
    for number, line in claim.RECURRENT_DROPOUT_LINES:
        if metadata.version("keras") == version:
            assert source[number - 1].strip() == line, (number, line)
        else:
            assert any(text.strip() == line for text in source), line
    forced = claim.RECURRENT_DROPOUT_LINES[0][0]
    assert "if self.implementation == 1:" in source[forced + 1]  # the cell's next line reads what it forced


def test_recurrent_dropouts_cost_is_explained_with_the_stored_op_counts():
    detail = {"keras.recurrent_dropout": '{"aten_ops":3834,"gpu_kernels":865}',
              "keras.relu": '{"aten_ops":1222,"gpu_kernels":358}', "keras.cudnn_auto": '{"aten_ops":97}'}
    rng = np.random.default_rng(0)
    data = pd.DataFrame([timed("cuda-h100-test", kernel, 1, 1e-3, rng=rng, phase="inference", detail=d)
                         for kernel, d in detail.items()])
    why = claim.recurrent_dropout_why(data)
    assert why.startswith("Keras 3.15.1 skips cuDNN whenever recurrent_dropout is set, even in inference (`if not "
                          "self.recurrent_dropout:`, keras/src/layers/rnn/lstm.py line 534), and forces "
                          "implementation=1 whenever it is set (`if self.recurrent_dropout != 0.0: "
                          "self.implementation = 1`, keras/src/layers/rnn/lstm.py lines 136-137)")
    assert why.endswith("on cuda-h100-test (Keras 3.15 on its torch backend) one inference call with recurrent "
                        "dropout ran 3,834 ATen ops against 1,222 for the ReLU layer")
    assert "ATen" not in claim.recurrent_dropout_why(data.assign(observed_detail=""))  # only what the rows hold


# --- the stored GPU sets ----------------------------------------------------------------------------------------

def test_the_stored_gpu_verdicts_name_the_backend_their_fingerprints_record():
    """Every stored GPU set's Keras rows record the backend their run's fingerprint records (`keras_backend`), and
    its verdict names that backend in every part and in its text."""
    data = results.load(claim.NAME, sets="cuda-*")
    if data.empty:
        pytest.skip("no GPU set of claim 1 is stored")
    fingerprints = {fp["id"]: fp for found in results.fingerprints(claim.NAME).values() for fp in found}
    keras_rows = data[data.kernel.str.startswith("keras.") & (data.status == "ok")]
    for row in keras_rows.itertuples():
        assert row.backend == fingerprints[row.fingerprint_id]["keras_backend"], row
    for found in claim.CLAIM.judge(data):
        backends = set(keras_rows[keras_rows.hardware_id == found.hardware_id].backend)
        for backend in backends:
            assert f"on its {backend} backend" in found.ours_text
        assert all(name.endswith(tuple(f" on its {b} backend)" for b in backends)) for name, _, _ in found.parts)


# --- on a CPU: the analogue -------------------------------------------------------------------------------------

def test_a_cpu_set_is_a_cpu_analogue_that_never_counts():
    found = verdict("cpu-test-2t", [3.0, 3.2, 2.8, 3.1])
    assert found.outcome == Outcome.REPRODUCED and found.evidence == CPU_ANALOGUE and not found.counts
    assert found.low <= found.ours <= found.high and "95% interval" in found.ours_text


@pytest.mark.parametrize(("slowdowns", "outcome"), [
    ([3.0, 3.2, 2.8, 3.1], Outcome.REPRODUCED),
    ([8.0, 8.5, 7.5, 8.2], Outcome.REPRODUCED),  # above Chollet's 2-5x, below the Q&A's 15x: no seed exceeded
    ([40.0, 35.0, 45.0, 38.0], Outcome.EXCEEDS),  # far above both seeds' figures
    ([1.6, 1.7, 1.5, 1.6], Outcome.PARTLY),
    ([1.0, 1.05, 0.95, 1.0], Outcome.NOT_REPRODUCED),
    ([1.6, 2.6, 1.7, 2.5], Outcome.INCONCLUSIVE),  # the configurations disagree across the 2x edge
])
def test_the_cpu_verdict_follows_the_interval(slowdowns, outcome):
    assert verdict("cpu-test-2t", slowdowns).outcome == outcome


def test_noisy_samples_widen_the_interval_until_it_straddles_the_edge():
    assert verdict("cpu-test-2t", [2.3] * 4, spread=0.01).outcome == Outcome.REPRODUCED
    assert verdict("cpu-test-2t", [2.3] * 4, spread=0.6).outcome == Outcome.INCONCLUSIVE


def test_a_cpu_verdict_says_what_it_stands_in_for_and_what_the_seeds_triggers_cost():
    data = pd.DataFrame(rows("cpu-test-2t", [3.0, 3.2])
                        + rows("cpu-test-2t", [0.97, 0.95], seed=1, pair=("keras.cudnn_auto", "keras.relu"),
                               backend="tensorflow"))
    (found,) = claim.verdicts(data)
    assert found.ours_text.startswith("CPU analogue, oneDNN's fused LSTM against the same module without it")
    assert found.ours_text.endswith("the seeds' own triggers cost activation='relu' 0.96x on Keras 3.15 on its "
                                    "tensorflow backend here (Keras has no fused LSTM on a CPU to fall back from)")
    assert "keras.relu" not in found.ours_text.split(";")[0]  # the Keras trigger is context, never the figure


def test_a_cpu_set_timed_only_in_inference_is_not_measured():
    found = verdict("cpu-test-2t", [3.0, 3.2], phase="inference")
    assert found.outcome == Outcome.NOT_MEASURED and found.ours_text == "not measured in train"


# --- the bands, the words, the summary, the grid -----------------------------------------------------------------

def test_bands_decide_on_intervals():
    bands = Bands((1.25, 2.0, 5.0), (Outcome.NOT_REPRODUCED, Outcome.PARTLY, Outcome.REPRODUCED, Outcome.EXCEEDS))
    assert bands.decide(2.1, 4.9) == Outcome.REPRODUCED
    assert bands.decide(1.9, 2.1) == Outcome.INCONCLUSIVE
    assert bands.decide(5.0, 60.0) == Outcome.EXCEEDS
    assert bands.decide(0.5, 1.0) == Outcome.NOT_REPRODUCED
    assert bands.decide(float("nan"), 2.0) == Outcome.NOT_MEASURED and bands.decide(None, None) == Outcome.NOT_MEASURED
    with pytest.raises(ValueError, match="increasing edges"):
        Bands((2.0, 1.0), (Outcome.PARTLY, Outcome.REPRODUCED, Outcome.EXCEEDS))


@pytest.mark.parametrize(("low", "high", "words"), [
    (1.3, 1.9, "below Chollet's 2-5x"), (2.1, 4.9, "within Chollet's 2-5x"),
    (6.0, 14.0, "above Chollet's 2-5x, below the Q&A's 15x"), (16.0, 30.0, "above the Q&A's 15x"),
    (4.0, 6.0, "across Chollet's 5x"), (1.5, 20.0, "across Chollet's 2x and Chollet's 5x and the Q&A's 15x"),
])
def test_the_verdict_names_the_seed_figure_it_is_near(low, high, words):
    assert claim.near_seed(low, high) == words


@pytest.mark.parametrize(("kernel", "backend", "versions", "words"), [
    ("keras.relu", "torch", KERAS_315, "Keras 3.15 on its torch backend"),
    ("keras", "jax", None, "Keras on its jax backend"),
    ("keras.relu", "", KERAS_315, "Keras 3.15 (backend not recorded)"),  # never taken for TensorFlow
    ("keras.relu", float("nan"), {"keras": "3.16.0"}, "Keras 3.16 (backend not recorded)"),
    ("keras.relu", "tensorflow", [KERAS_315, json.dumps({"keras": "3.16.0"}), None], "Keras 3.15/3.16 on its "
                                                                                      "tensorflow backend"),
    ("torch.native", "", KERAS_315, "PyTorch 2.11"),
    ("torch", "torch", "not json", "PyTorch"),
])
def test_one_function_names_every_claims_framework(kernel, backend, versions, words):
    """`frameworks.framework_words`, from a row's `backend` and `versions` columns: one row's, or many rows'."""
    assert framework_words(kernel, backend, versions) == words


def test_the_summary_whiskers_are_the_verdicts_interval():
    table = claim.slowdowns(pd.DataFrame(rows("cpu-test-2t", [1.6, 2.6, 1.7, 2.5])))
    (row,) = claim.summary(table).itertuples()
    found = verdict("cpu-test-2t", [1.6, 2.6, 1.7, 2.5])
    assert (row.ratio, row.ratio_lo, row.ratio_hi) == pytest.approx((found.ours, found.low, found.high))
    assert row.label == "torch.native"


def test_the_lease_times_every_seed_case_it_can_with_its_baseline():
    lease = claim.CLAIM.lease
    assert {"keras.relu", "keras.recurrent_dropout", "keras.generic", "keras.cudnn_auto"} <= lease.kernels
    # PyTorch's own loop is the pooled context's alone: the default grid times it after the lease's five claims
    assert not {"torch.native", "torch.fused"} & lease.kernels and lease.overrides["blog_model"] is False


def test_the_explainers_cost_line_names_the_keras_backend(tmp_path):
    from lstmstudy.findings import measured_cost

    stored = seed_cases("cuda-fake-gpu", {"keras.relu": [3.0]})
    results.append(claim.NAME, "cuda-fake-gpu", [
        {**{k: v for k, v in row.items() if k not in ("samples", "round_sizes")}, "claim": claim.NAME,
         "framework": "keras", "device": "cuda:0", "device_kind": "cuda", "samples_s": row["samples"],
         "round_sizes": row["round_sizes"], "n_samples": len(row["samples"]), "created_at": "2026-01-01T00:00:00+00:00"}
        for row in stored], tmp_path)
    cost = measured_cost(["activation"], batch=1, hidden=64, phase="train", framework="keras/torch", root=tmp_path)
    assert cost.measured_on == "Keras 3.15 on its torch backend"
    assert "activation='relu' on cuda-fake-gpu with Keras 3.15 on its torch backend (keras/torch, fp32" in str(cost)


def test_torch_compiled_is_timed_on_a_gpu_and_asked_for_on_a_cpu():
    """Inductor's compiles take a minute of a 2-core CPU: the CPU default leaves torch.compiled out, a GPU's
    grid times it once per phase, at its first batch and hidden size, and `compiled` asks for it anywhere."""
    from lstmstudy.errors import ParameterError

    def compiled(points):
        return sorted((p.phase, p.shape.batch, p.shape.hidden) for p in points if p.kernel in claim.COMPILED)

    assert compiled(claim.CLAIM.points("cpu")) == []
    assert compiled(claim.CLAIM.points("cuda")) == [("inference", 1, 64), ("train", 1, 64)]
    assert compiled(claim.CLAIM.points("cpu", compiled=True)) == [("inference", 1, 64), ("train", 1, 64)]
    assert compiled(claim.CLAIM.points("cuda", quick=True)) == []
    assert len(claim.CLAIM.points("cpu", compiled=True)) == len(claim.CLAIM.points("cpu")) + 2
    with pytest.raises(ParameterError, match="compiled"):
        claim.CLAIM.parameters("cpu", compiled="yes")


# --- the blog's own model leads claims 1 and 2 -------------------------------------------------------------------

def blog_rows(hardware_id: str, slowdown: float, *, backend: str, phase: str = "train", seconds: float = 1e-2,
              seed: int = 0) -> list[dict]:
    """The blog model's two rows (LeakyReLU at `slowdown` times tanh's `seconds`) on one set, with quartiles."""
    rng = np.random.default_rng(seed)
    out = []
    for activation in claim.BLOG_ACTIVATIONS:
        row = timed(hardware_id, claim.BLOG_KERNEL, 1, seconds * (slowdown if activation == "leaky_relu" else 1.0),
                    rng=rng, phase=phase, backend=backend, config=json.dumps({"activation": activation}))
        out.append({**row, "p25_s": float(np.percentile(row["samples"], 25)),
                    "p75_s": float(np.percentile(row["samples"], 75))})
    return out


BLOG_SETS = pd.DataFrame(blog_rows("cuda-h100-test", 3.6, backend="torch", seconds=0.0143)
                         + blog_rows("cuda-h100-test", 4.6, backend="torch", phase="inference", seconds=0.0052)
                         + blog_rows("cpu-a-2t", 1.0, backend="tensorflow", seconds=0.005)
                         + blog_rows("cpu-b-2t", 1.0, backend="tensorflow", seconds=0.019)
                         + blog_rows("cpu-a-2t", 1.0, backend="tensorflow", phase="inference", seconds=0.0017))


def test_the_blog_models_steps_put_the_gpu_sets_first_and_name_what_ran_them():
    steps = claim.blog_steps(BLOG_SETS)
    assert steps.hardware_id.iloc[0] == "cuda-h100-test" and steps.gpu.iloc[0]
    assert set(steps[steps.gpu].framework) == {"Keras 3.15 on its torch backend"}
    assert set(steps[~steps.gpu].framework) == {"Keras 3.15 on its tensorflow backend"}
    assert (steps.p25_ms <= steps.ms).all() and (steps.ms <= steps.p75_ms).all()
    assert claim.blog_steps(BLOG_SETS.iloc[:0]).empty


def test_the_blog_sentence_is_computed_from_the_rows_with_the_backend_of_each_side():
    steps = claim.blog_steps(BLOG_SETS)
    gpu = steps[steps.gpu & (steps.phase == "train")].set_index("activation").ms
    cpus = steps[~steps.gpu & (steps.phase == "train") & (steps.activation == "LeakyReLU")].ms
    sentence = claim.blog_sentence(BLOG_SETS)
    assert sentence.startswith("On the GPU cuda-h100-test (Keras 3.15 on its torch backend) one training step")
    assert f"took {gpu['LeakyReLU']:.3g} ms, {gpu['LeakyReLU'] / gpu['tanh']:.3g}x the {gpu['tanh']:.3g} ms" in sentence
    assert f"2 CPU-only sets (Keras 3.15 on its tensorflow backend" in sentence
    assert f"{cpus.min():.3g}-{cpus.max():.3g} ms" in sentence
    assert "not a comparison of two devices" in sentence  # torch on the GPU, TensorFlow on the CPUs
    same = BLOG_SETS.assign(backend="torch")
    assert "not a comparison of two devices" not in claim.blog_sentence(same)
    assert claim.blog_sentence(BLOG_SETS.iloc[:0]) == "The blog's own model was not timed on any stored set."


def test_the_blog_figure_is_one_panel_labelled_with_units_and_hardware():
    import matplotlib.pyplot as plt

    fig = claim.blog_figure(BLOG_SETS)
    (ax,) = fig.axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0].startswith("cuda-h100-test\n(GPU; Keras 3.15 on its torch backend)")
    assert all("(CPU only; Keras 3.15 on its tensorflow backend)" in label for label in labels[1:])
    assert "ms" in ax.get_xlabel() and ax.get_xscale() == "log" and fig.get_figwidth() <= 10
    assert claim.blog_figure(BLOG_SETS.iloc[:0]) is None
    plt.close("all")


def test_the_fallback_bars_wrap_and_give_each_kernel_its_colour():
    import matplotlib.pyplot as plt

    from lstmstudy import plots

    table = pd.concat([claim.summary(claim.slowdowns(pd.DataFrame(rows(f"cpu-{i}-2t", [2.0, 3.0], seed=i))))
                       for i in range(5)] + [claim.summary(claim.slowdowns(pd.DataFrame(
                           seed_cases("cuda-h100-test", {"keras.relu": [6.0, 6.5]}))))])
    fig = plots.ratio_bars(table, x="label", xlabel="fallback kernel", ylabel="slowdown (x)", col_wrap=3)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 6 and fig.get_figwidth() <= 10
    assert len({round(ax.get_position().x0, 2) for ax in panels}) == 3  # two rows of three
    assert panels[0].get_title() == "cuda-h100-test"  # the GPU set first
    (bar,) = panels[0].patches
    assert bar.get_facecolor()[:3] == pytest.approx(plots.kernel_colour("keras.relu"))
    plt.close("all")
