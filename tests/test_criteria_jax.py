"""The explainer and the watch on Keras's jax backend must agree with Keras's own decision there, as they do on
TensorFlow (tests/test_criteria.py) and torch.

On this CPU-only machine Keras on jax never reaches cuDNN, so its decision is observed by spying, in one child
process with `KERAS_BACKEND=jax` (a process has one Keras backend): jax's GPU check is made to answer yes and
`jax.experimental.rnn.lstm` (cuDNN's RNN) is replaced by a recorder returning correctly shaped outputs. Everything
else is Keras's real code, so a layer "uses cuDNN" exactly when the recorder is called and returns. The recorder
refuses what jaxlib's cuDNN lowering refuses (float16 and bfloat16, with its ValueError), as an eager call meets it.
The watch runs there too, unspied, where jax has no GPU.
"""

from __future__ import annotations

import textwrap

import pytest

from lstmstudy.backends import importable

pytestmark = pytest.mark.skipif(not (importable("jax") and importable("keras")),
                                reason="needs jax and keras (pip install -e '.[study]' in the checkout)")

CHILD = textwrap.dedent("""
    import importlib, json, warnings
    from unittest import mock
    import numpy as np
    import jax, jax.numpy as jnp, jax.experimental.rnn as jax_rnn
    import keras
    keras_jax_rnn = importlib.import_module("keras.src.backend.jax.rnn")  # the package's `rnn` is a function
    from lstmstudy.kernels.criteria import explain_cudnn
    from lstmstudy.watch import FallbackWarning, watching

    L = keras.layers
    calls = []

    def recorder(x, h_0, c_0, weights, seq_lengths, *, input_size, hidden_size, num_layers, dropout, bidirectional,
                 **_):
        if x.dtype not in (jnp.float32, jnp.float64):  # jaxlib/gpu_rnn.py's _rnn_fwd_lowering (and complex types)
            raise ValueError(f"Unknown output type {x.dtype}")
        calls.append(bidirectional)
        y = jnp.zeros(x.shape[:2] + ((2 if bidirectional else 1) * hidden_size,), x.dtype)
        return y, h_0, c_0

    LSTM = {"default": {}, "relu": {"activation": "relu"}, "jnp.tanh": {"activation": jnp.tanh},
            "keras.ops.tanh": {"activation": keras.ops.tanh},
            "jax.nn.sigmoid": {"recurrent_activation": jax.nn.sigmoid},
            "keras.ops.sigmoid": {"recurrent_activation": keras.ops.sigmoid}, "hard_sigmoid":
            {"recurrent_activation": "hard_sigmoid"}, "unroll": {"unroll": True}, "no bias": {"use_bias": False},
            "recurrent_dropout": {"recurrent_dropout": 0.2}, "dropout": {"dropout": 0.3},
            "use_cudnn=False": {"use_cudnn": False}, "use_cudnn=True": {"use_cudnn": True},
            "relu, use_cudnn=True": {"activation": "relu", "use_cudnn": True},
            "mixed_float16": {"dtype": "mixed_float16"}, "mixed_bfloat16": {"dtype": "mixed_bfloat16"},
            "mixed_float16, use_cudnn=True": {"dtype": "mixed_float16", "use_cudnn": True},
            "float64": {"dtype": "float64"}}  # computed in float32 unless jax_enable_x64 is set
    GRU = {"default": {}, "relu": {"activation": "relu"}, "no bias": {"use_bias": False},
           "reset_after=False": {"reset_after": False},
           "use_cudnn=True": {"use_cudnn": True}, "unroll, use_cudnn=True": {"unroll": True, "use_cudnn": True}}
    x = np.ones((2, 3, 5), "float32")
    right_padded = np.array([[1, 1, 0], [1, 0, 0]], bool)

    def decide(layer, mask=None):
        calls.clear()
        try:
            layer(x, mask=mask, training=True)
            raised = False
        except ValueError:  # use_cudnn=True where the backend declines the layer
            raised = True
        explained = explain_cudnn(layer, mask=mask, device="cuda")
        notes = [n.message for e in explained for n in e.notes if n.code == "use_cudnn_true"]
        return {"keras": [bool(calls), raised], "explained": [[e.fused_eligible for e in explained],
                                                              any("raises" in n for n in notes)],
                "codes": sorted({r.code for e in explained for r in e.reasons}),
                "elsewhere": [n.message for e in explained for n in e.notes if n.code == "jax_gru_elsewhere"]}

    spied = {}
    with mock.patch.object(keras_jax_rnn, "_is_gpu_available", lambda: True), \\
            mock.patch.object(jax_rnn, "lstm", recorder):
        for name, settings in LSTM.items():
            spied["LSTM " + name] = decide(L.LSTM(4, **settings))
        spied["LSTM right-padded mask"] = decide(L.LSTM(4), right_padded)
        for name, settings in GRU.items():
            spied["GRU " + name] = decide(L.GRU(4, **settings))
        calls.clear()
        both = L.Bidirectional(L.LSTM(4))
        both(x)
        spied["Bidirectional"] = {"keras": calls[:], "explained": [e.fused_eligible for e in explain_cudnn(
            both, device="cuda")]}

    watched = {}
    for name, layer in {"LSTM default": L.LSTM(4), "LSTM relu": L.LSTM(4, activation="relu"),
                        "GRU default": L.GRU(4)}.items():
        model = keras.Sequential([keras.Input((3, 5)), layer])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with watching(model) as watch:
                model(x)
        said = [w.message for w in caught if isinstance(w.message, FallbackWarning)]
        watched[name] = {"warnings": len(said), "codes": sorted({r.code for f in watch.findings for r in f.reasons}),
                         "kernels": [f.kernel for f in watch.findings]}
    print("RESULT" + json.dumps({"backend": keras.backend.backend(), "jax_gpu": jax.default_backend(),
                                 "spied": spied, "watched": watched}))
""")


@pytest.fixture(scope="module")
def on_jax(request, tmp_path_factory) -> dict:
    """What `CHILD` printed, computed once per test run."""
    from test_keras_kernels import backend_child

    return backend_child(request, tmp_path_factory, "criteria_on_jax", CHILD, KERAS_BACKEND="jax",
                         JAX_PLATFORMS="cpu")


def test_every_lstm_and_gru_setting_is_decided_as_keras_decides_on_jax(on_jax):
    assert on_jax["backend"] == "jax"
    for name, found in on_jax["spied"].items():
        if name == "Bidirectional":
            continue
        used, raised = found["keras"]
        fused, says_raises = found["explained"]
        assert fused == [used], (name, found)
        assert says_raises == raised, (name, found)
    spied = on_jax["spied"]
    # the cases that tell the jax rules from the other backends' (or that would be easy to get wrong)
    assert spied["LSTM default"]["keras"] == [True, False] and spied["LSTM dropout"]["keras"][0]
    assert spied["LSTM jnp.tanh"]["keras"][0] and not spied["LSTM jax.nn.sigmoid"]["keras"][0]
    assert spied["LSTM right-padded mask"]["codes"] == ["mask_jax_backend"]
    assert spied["GRU default"]["codes"] == ["jax_gru"] and spied["GRU default"]["keras"] == [False, False]
    assert spied["GRU unroll, use_cudnn=True"]["keras"] == [False, True]
    # jax's cuDNN LSTM is float32 only: mixed precision is Keras's loop (and a ValueError under use_cudnn=True)
    assert spied["LSTM mixed_float16"]["codes"] == spied["LSTM mixed_bfloat16"]["codes"] == ["jax_dtype"]
    assert spied["LSTM mixed_float16, use_cudnn=True"]["keras"] == [False, True]
    assert spied["LSTM float64"]["keras"] == [True, False] and spied["LSTM float64"]["codes"] == []
    # no setting brings a GRU cuDNN on jax: only what moves it from jax's scan to Keras's loop is named besides
    assert spied["GRU relu"]["codes"] == spied["GRU no bias"]["codes"] == ["jax_gru"]
    assert spied["GRU relu"]["elsewhere"] and spied["GRU no bias"]["elsewhere"]  # what tensorflow and torch still meet
    assert not spied["GRU default"]["elsewhere"]
    assert spied["GRU reset_after=False"]["codes"] == ["jax_gru", "reset_after"]


def test_a_bidirectional_lstm_is_one_fused_call_and_both_directions_are_explained_fused(on_jax):
    found = on_jax["spied"]["Bidirectional"]
    assert found["keras"] == [True] and found["explained"] == [True, True]


def test_the_watch_names_what_keeps_a_layer_off_cudnn_on_jax(on_jax):
    """No GPU for jax here: a default LSTM only lacks one (left alone); a ReLU LSTM and any GRU are named, the GRU
    though jax's own scan ran it without calling the cell."""
    assert on_jax["jax_gpu"] == "cpu"
    watched = on_jax["watched"]
    assert watched["LSTM default"] == {"warnings": 0, "codes": [], "kernels": []}
    assert watched["LSTM relu"]["warnings"] == 1 and "activation" in watched["LSTM relu"]["codes"]
    assert watched["GRU default"]["warnings"] == 1 and "jax_gru" in watched["GRU default"]["codes"]
    assert watched["GRU default"]["kernels"] == ["framework-loop"]
