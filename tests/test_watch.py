"""`lstmstudy.watch`: one FallbackWarning per recurrent layer that misses cuDNN, with the reason, the fix and the
measured cost, observed on the layer's first forward.

This machine has no GPU: the warnings say what a GPU would meet. `fake_gpu` lets Keras believe a GPU is there
(as tests/test_criteria.py does) to check that a layer Keras really sends to cuDNN is left alone.
"""

from __future__ import annotations

import importlib
import json
import re
import warnings
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pytest
import torch
from torch import nn

from lstmstudy import results
from lstmstudy.watch import FallbackWarning, Watch, WatchCallback, explain_saved_model, measured_cost, watching

keras = pytest.importorskip("keras")
if keras.backend.backend() != "tensorflow":  # pragma: no cover - the fake GPU patches the TensorFlow backend
    pytest.skip("these tests drive Keras's TensorFlow backend", allow_module_level=True)
import tensorflow as tf  # noqa: E402

X = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)


def fallbacks(run, *models, **options) -> list[FallbackWarning]:
    """The FallbackWarnings `run()` emits while `models` are watched."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with watching(*models, **options):
            run()
    return [w.message for w in caught if isinstance(w.message, FallbackWarning)]


def only(warned: list[FallbackWarning]):
    assert len(warned) == 1, [str(w) for w in warned]
    return warned[0].finding


@contextmanager
def fake_gpu():
    """Keras sees a GPU and its cuDNN op returns zeros, so its cuDNN path returns instead of falling back."""
    rnn = importlib.import_module("keras.src.backend.tensorflow.rnn")

    def cudnn_rnn_v3(*, input, input_h, input_c, time_major, **_):
        batch, steps = (input.shape[1], input.shape[0]) if time_major else (input.shape[0], input.shape[1])
        shape = (steps, batch, input_h.shape[-1]) if time_major else (batch, steps, input_h.shape[-1])
        return tf.zeros(shape, input.dtype), input_h, input_c, tf.zeros([0]), tf.zeros([0])

    with mock.patch.object(rnn, "_is_gpu_available", lambda: True), \
            mock.patch.object(tf.raw_ops, "CudnnRNNV3", cudnn_rnn_v3):
        yield


# --- every cuDNN criterion, for LSTM and GRU ---------------------------------------------------------------

BREAKS = {  # keyword -> (value, the reason's code, a word of the fix)
    "activation='relu'": ({"activation": "relu"}, "activation", "activation='tanh'"),
    "activation=LeakyReLU layer": ({"activation": keras.layers.LeakyReLU(0.05)}, "activation", "activation='tanh'"),
    "activation=lambda": ({"activation": lambda x: tf.tanh(x)}, "activation", "activation='tanh'"),
    "recurrent_activation": ({"recurrent_activation": "hard_sigmoid"}, "recurrent_activation", "'sigmoid'"),
    "recurrent_dropout": ({"recurrent_dropout": 0.2}, "recurrent_dropout", "Dropout layer"),
    "unroll": ({"unroll": True}, "unroll", "unroll=False"),
    "use_bias": ({"use_bias": False}, "use_bias", "use_bias=True"),
    "use_cudnn=False": ({"use_cudnn": False}, "use_cudnn", "use_cudnn='auto'"),
}


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("case", sorted(BREAKS))
def test_each_criterion_gets_one_warning_with_its_reason_and_fix(kind, case):
    config, code, fix = BREAKS[case]
    layer = getattr(keras.layers, kind)(2, name="rnn", **config)
    found = only(fallbacks(lambda: layer(X), layer))
    assert found.layer == "rnn" and found.layer_type == kind and found.on_gpu
    assert code in [r.code for r in found.reasons]
    assert any(fix in line for line in found.fixes), found.fixes
    assert found.ran_here == ("unrolled" if case == "unroll" else "framework-loop")
    assert f"{kind} layer 'rnn'" in str(found) and "on a GPU this layer would not use cuDNN" in str(found)


def test_gru_reset_after_false_is_named():
    layer = keras.layers.GRU(2, reset_after=False, name="gru")
    found = only(fallbacks(lambda: layer(X), layer))
    assert [r.code for r in found.reasons] == ["reset_after"] and "reset_after=True" in found.fixes[0]
    assert "claim 1 measures LSTM layers only" in str(found.cost)


@pytest.mark.parametrize(("mask", "code"), [([[0, 1, 1], [1, 1, 1]], "mask_not_right_padded"),
                                            ([[0, 0, 0], [1, 1, 1]], "mask_fully_masked")])
def test_masks_keras_avoids_cudnn_for_are_named(mask, code):
    layer = keras.layers.LSTM(2, name="lstm")
    found = only(fallbacks(lambda: layer(X, mask=np.asarray(mask, bool)), layer))
    assert code in [r.code for r in found.reasons]


def masked_model() -> keras.Model:
    return keras.Sequential([keras.Input((4,)), keras.layers.Embedding(10, 3, mask_zero=True),
                             keras.layers.LSTM(2, name="lstm"), keras.layers.Dense(1)])


@pytest.mark.parametrize("how", ["predict", "evaluate", "fit on a Dataset"])
def test_a_left_padded_mask_is_caught_in_graph_mode_steps(how):
    """fit, evaluate and predict trace a tf.function, where the mask's values are symbolic."""
    model = masked_model()
    model.compile(loss="mse")
    x = keras.utils.pad_sequences([[1, 2], [3, 4, 5, 6], [7]], maxlen=4)  # padding='pre', Keras's default
    y = np.zeros((3, 1), np.float32)
    run = {"predict": lambda: model.predict(x, verbose=0), "evaluate": lambda: model.evaluate(x, y, verbose=0),
           "fit on a Dataset": lambda: model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(2), verbose=0)}[how]
    found = only(fallbacks(run, model))
    assert found.layer == "lstm" and "mask_not_right_padded" in [r.code for r in found.reasons]
    assert not {"fit", "evaluate", "predict"} & set(vars(model))  # the methods are the model's own again
    right = keras.utils.pad_sequences([[1, 2], [3, 4, 5, 6]], maxlen=4, padding="post")
    fresh = masked_model()
    assert fallbacks(lambda: fresh.predict(right, verbose=0), fresh) == []
    np.testing.assert_allclose(fresh.predict(x, verbose=0), fresh(x).numpy(), rtol=1e-5)


def test_a_right_padded_mask_and_a_default_layer_say_nothing_without_a_gpu():
    layer = keras.layers.LSTM(2)
    assert fallbacks(lambda: layer(X, mask=np.asarray([[1, 1, 0], [1, 0, 0]], bool)), layer) == []
    asked = only(fallbacks(lambda: layer(X), layer, report_missing_gpu=True))
    assert [r.code for r in asked.reasons] == ["no_gpu"] and not asked.on_gpu
    assert "only the GPU is missing" in str(asked.cost)


def test_what_ran_is_observed_a_layer_keras_sends_to_cudnn_is_left_alone():
    fine, relu = keras.layers.LSTM(2, name="fine"), keras.layers.LSTM(2, activation="relu", name="relu")
    with fake_gpu():
        warned = fallbacks(lambda: (fine(X), relu(X)), fine, relu, report_missing_gpu=True)
    assert [w.finding.layer for w in warned] == ["relu"]


# --- models: Bidirectional, nested, fit, once per layer -------------------------------------------------------


def test_both_directions_of_a_bidirectional_are_named():
    model = keras.Sequential([keras.Input((3, 4)), keras.layers.Bidirectional(
        keras.layers.LSTM(2, activation="relu", name="lstm"), name="bi")])
    warned = fallbacks(lambda: model(X), model)
    assert sorted(w.finding.layer for w in warned) == ["bi/backward_lstm", "bi/forward_lstm"]


def test_layers_of_nested_models_are_named_by_their_path():
    encoder = keras.Sequential([keras.Input((3, 4)), keras.layers.GRU(2, recurrent_dropout=0.1, name="gru")],
                               name="encoder")
    model = keras.Sequential([keras.Input((3, 4)), encoder, keras.layers.Dense(1)])
    assert only(fallbacks(lambda: model(X), model)).layer == "encoder/gru"


def blog_model() -> keras.Model:
    """The blog post's model (seed 000): a LeakyReLU-style LSTM, then a default LSTM."""
    model = keras.Sequential([
        keras.Input(shape=(32, 16), batch_size=1),
        keras.layers.LSTM(64, activation=keras.layers.ReLU(negative_slope=0.05), return_sequences=True, name="lstm"),
        keras.layers.Dropout(0.2),
        keras.layers.LSTM(32, name="lstm_1"),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(16),
    ])
    model.compile(loss="mean_squared_error", optimizer="adam")
    return model


def blog_data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((4, 32, 16)).astype(np.float32), rng.standard_normal((4, 16)).astype(np.float32)


def test_each_layer_warns_once_however_often_it_runs(tmp_path):
    model = blog_model()
    x, y = blog_data()

    def run():
        model.fit(x, y, epochs=2, batch_size=1, verbose=0)
        model(x[:1])
        model.predict(x, verbose=0)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with watching(model, report_missing_gpu=True, results_root=tmp_path) as watch:
            run()
            assert "inner_loop" not in vars(model.layers[0])  # unwatched after its first forward
    names = [w.message.finding.layer for w in caught if isinstance(w.message, FallbackWarning)]
    assert names == ["lstm", "lstm_1"] and [f.layer for f in watch.findings] == names


def test_the_blog_models_warning_blames_only_its_first_lstm(tmp_path):
    model = blog_model()
    x, y = blog_data()
    found = only(fallbacks(lambda: model.fit(x, y, batch_size=1, verbose=0), model, results_root=tmp_path))
    assert found.layer == "lstm" and [r.code for r in found.reasons] == ["activation"]
    assert "a ReLU layer" in str(found) and "activation='tanh'" in str(found)
    assert "no measurement yet on a GPU for the nearest setting claim 1 times, activation='relu'" in str(found)


def test_a_warning_filter_makes_it_an_exception_and_the_layer_is_restored():
    layer = keras.layers.LSTM(2, activation="relu")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        with pytest.raises(FallbackWarning, match="activation='tanh'"), watching(layer):
            layer(X)
    assert "inner_loop" not in vars(layer) and "call" not in vars(layer.cell)
    model = blog_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        with pytest.raises(FallbackWarning, match="activation='tanh'"), watching(model) as watch:
            model.predict(blog_data()[0], verbose=0)  # Keras re-raises it from inside the layer call
    assert [f.layer for f in watch.findings] == ["lstm"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        with watching(layer) as watch:
            layer(X)
    assert len(watch.findings) == 1  # silenced, still kept


def test_the_keras_callback_warns_once_during_fit_with_validation(tmp_path):
    model = blog_model()
    x, y = blog_data()
    callback = WatchCallback(results_root=tmp_path)
    assert isinstance(callback, keras.callbacks.Callback)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x, y, epochs=2, batch_size=2, verbose=0, validation_data=(x, y), callbacks=[callback])
    assert [w.message.finding.layer for w in caught if isinstance(w.message, FallbackWarning)] == ["lstm"]
    assert [f.layer for f in callback.findings] == ["lstm"]


def test_watching_needs_models():
    with pytest.raises(TypeError, match="needs the models"):
        watching()


# --- torch -----------------------------------------------------------------------------------------------------


class Encoder(nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.encoder = nn.LSTM(4, 3, batch_first=True, **options)

    def forward(self, x):
        return self.encoder(x)[0]


def test_torch_fp64_gets_cudnn_on_a_gpu_so_says_nothing():
    module = Encoder().double()
    assert fallbacks(lambda: module(torch.zeros(2, 3, 4, dtype=torch.float64)), module) == []


def test_torch_with_cudnn_disabled_is_named_with_what_the_profiler_saw(monkeypatch):
    module = Encoder()
    monkeypatch.setattr(torch.backends.cudnn, "enabled", False)
    found = only(fallbacks(lambda: (module(torch.zeros(2, 3, 4)), module(torch.zeros(2, 3, 4))), module))
    assert found.layer == "encoder" and found.framework == "torch" and found.on_gpu
    assert [r.code for r in found.reasons] == ["cudnn_disabled"] and "cudnn.enabled = True" in found.fixes[0]
    assert found.ran_here == "onednn"  # the profiler's aten::mkldnn_rnn_layer: oneDNN still runs on the CPU
    assert "vendor kernel disabled" in str(found.cost)


def test_torch_projections_on_the_cpu_are_reported_only_when_asked():
    module = Encoder(proj_size=2)
    assert fallbacks(lambda: module(torch.zeros(2, 3, 4)), module) == []
    found = only(fallbacks(lambda: module(torch.zeros(2, 3, 4)), module, report_missing_gpu=True))
    assert found.kernel == "aten-loop" and "onednn_proj_size" in [n.code for n in found.notes]


def test_torch_gru_and_rnn_are_watched_with_their_type():
    gru, rnn = nn.GRU(4, 3), nn.RNN(4, 3)
    warned = fallbacks(lambda: (gru(torch.zeros(3, 2, 4)), rnn(torch.zeros(3, 2, 4))), gru, rnn,
                       report_missing_gpu=True)
    assert [(w.finding.layer_type, w.finding.kernel) for w in warned] == [("GRU", "aten-loop"), ("RNN", "aten-loop")]
    assert "forward" not in vars(gru) and "forward" not in vars(rnn)


# --- the cost, from stored measurements -------------------------------------------------------------------------


def store_gpu_rows(root, hardware_id: str = "cuda-fake-gpu", backend: str = "tensorflow") -> None:
    """Claim 1 rows for a made-up GPU set: keras.relu at 3x and 2x its cuDNN baseline, at two sizes."""
    rows = []
    for hidden, slowdown in ((64, 3.0), (512, 2.0)):
        for kernel, scale in (("keras.cudnn_auto", 1.0), ("keras.relu", slowdown)):
            samples = [scale * (1e-3 + 1e-6 * i) for i in range(20)]
            rows.append({"claim": "cudnn_fallback", "kernel": kernel, "framework": "keras", "backend": backend,
                         "device": "cuda:0", "device_kind": "cuda", "hardware_id": hardware_id, "precision": "fp32",
                         "phase": "train", "batch": 1, "timesteps": 32, "features": 32, "hidden": hidden, "layers": 1,
                         "bidirectional": False, "config": "{}", "n_samples": len(samples),
                         "median_s": float(np.median(samples)), "samples_s": samples, "status": "ok",
                         "created_at": "2026-01-01T00:00:00+00:00"})
    results.append("cudnn_fallback", hardware_id, rows, root)


def test_the_cost_is_the_closest_stored_gpu_configuration(tmp_path):
    store_gpu_rows(tmp_path)
    near = measured_cost(["activation"], batch=1, hidden=32, phase="train", root=tmp_path)
    far = measured_cost(["activation"], batch=1, hidden=1024, phase="train", root=tmp_path)
    assert (near.hidden, round(near.ratio, 2), far.hidden, round(far.ratio, 2)) == (64, 3.0, 512, 2.0)
    assert near.ratio_lo <= near.ratio <= near.ratio_hi
    assert str(near).startswith("3.00x slower than cuDNN (95% interval") and "cuda-fake-gpu" in str(near)
    none = measured_cost(["unroll"], root=tmp_path)
    assert none.ratio is None and "for the nearest setting claim 1 times, unroll=True" in str(none)
    assert "no published figure for this trigger; published for the generic kernel against cuDNN: 15x" in str(none)


def test_the_cost_prefers_the_layers_own_backend_and_names_it(tmp_path):
    store_gpu_rows(tmp_path)  # measured with Keras on TensorFlow
    cost = measured_cost(["activation"], batch=1, hidden=64, framework="keras/torch", root=tmp_path)
    assert cost.framework == "keras/tensorflow" and "(keras/tensorflow, fp32, batch 1" in str(cost)
    other = tmp_path / "other"
    store_gpu_rows(other)
    store_gpu_rows(other, hardware_id="cuda-torch-gpu", backend="torch")
    torch_cost = measured_cost(["activation"], batch=1, hidden=512, framework="keras/torch", root=other)
    assert torch_cost.hardware_id == "cuda-torch-gpu" and torch_cost.framework == "keras/torch"


def test_cpu_sets_are_never_quoted_as_a_gpu_cost(tmp_path):
    store_gpu_rows(tmp_path, hardware_id="cpu-fake")
    cost = measured_cost(["activation"], root=tmp_path)
    assert cost.ratio is None and "no measurement yet on a GPU" in str(cost)


def test_the_blog_models_warning_quotes_the_stored_cost(tmp_path):
    store_gpu_rows(tmp_path)
    model = blog_model()
    found = only(fallbacks(lambda: model(blog_data()[0][:1]), model, results_root=tmp_path))
    assert found.layer == "lstm" and "3.00x slower than cuDNN" in str(found) and "hidden 64" in str(found)


def test_a_saved_model_is_explained_layer_by_layer(tmp_path):
    path = tmp_path / "blog.keras"
    blog_model().save(path)
    first, second = explain_saved_model(path, results_root=tmp_path)
    assert (first.layer, first.fused, [r.code for r in first.reasons]) == ("lstm", False, ["activation"])
    assert (second.layer, second.fused, second.cost) == ("lstm_1", True, None)
    assert "cuDNN's fused kernel on a GPU" in str(second)
    json.dumps([first.as_dict(), second.as_dict()])  # plain types for --json


def test_watch_is_a_plain_context_manager():
    layer = keras.layers.LSTM(2, activation="relu")
    watch = Watch([layer])
    watch.start()
    assert "inner_loop" in vars(layer)
    watch.stop()
    assert "inner_loop" not in vars(layer) and watch.findings == []


# --- the book page ------------------------------------------------------------------------------------------------

PAGE = results.default_root().parent / "notebooks" / "check_your_model.ipynb"


def test_the_page_source_is_stripped_and_parameterised():
    import nbformat  # inside: a GPU node collects these tests without the notebook stack

    nb = nbformat.read(PAGE, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "strip outputs in notebooks/"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and "results_dir" in tagged[0].source


@pytest.mark.slow
def test_the_page_prints_the_blog_models_warning_and_the_stored_cost(tmp_path):
    import nbformat
    import papermill

    store_gpu_rows(tmp_path / "results")
    out = tmp_path / "check_your_model.ipynb"
    papermill.execute_notebook(str(PAGE), str(out), kernel_name="python3", progress_bar=False,
                               cwd=str(PAGE.parent.parent), parameters={"results_dir": str(tmp_path / "results")})
    # per cell: a kernel under load may send one cell's printing as several stream outputs
    printed = ["".join(o["text"] for o in c.outputs if o.get("name") == "stdout")
               for c in nbformat.read(out, as_version=4).cells if c.cell_type == "code"]
    watched, explained, fixed, stopped = [text for text in printed if text]
    # the Keras backend depends on the environment (tensorflow here; torch once a test has chosen it)
    assert re.search(r"LSTM layer 'lstm' \[keras/\w+\]", watched) and "'lstm_1'" not in watched
    assert "3.00x slower than cuDNN" in watched and "3.00x slower than cuDNN" in explained
    assert re.search(r"LSTM layer 'lstm_1' \[keras/\w+\]: cuDNN's fused kernel on a GPU", explained)
    assert explained.rstrip().endswith("exit status 1")  # the gate: a layer falls back
    assert fixed == "0 FallbackWarning(s)\n" and stopped.startswith("stopped at layer 'lstm'")
