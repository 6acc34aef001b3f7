"""Keras on its jax backend, the study's compiled-graph counterpart of TensorFlow's loop: claim 1's Keras kernels build,
compute the LSTM they claim to, predict a compiled loop on this CPU, and time with a sync that waits for jax.

One fresh process with `KERAS_BACKEND=jax` (a Keras process has one backend) does the work once per run; the tests
read its answer. Where jax is not installed (it is in the `study` extra) they skip with the reason.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from lstmstudy.backends import importable
from lstmstudy.kernels import keras_kernels
from lstmstudy.kernels.built import LSTMWeights

pytestmark = pytest.mark.skipif(not (importable("jax") and importable("keras")),
                                reason="needs jax and keras (pip install -e '.[study]' in the checkout)")

JAX_BACKEND_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from lstmstudy import contract, kernels, results, timing
    from lstmstudy.backends import keras_backend
    from lstmstudy.kernels.built import LSTMWeights
    from lstmstudy.shapes import LSTMShape

    shape = LSTMShape(batch=2, timesteps=4, features=3, hidden=4, layers=2, bidirectional=True)
    weights = LSTMWeights.random(shape, seed=9)
    computed = {}
    for name in ("keras.cudnn_auto", "keras.impl1", "keras.relu", "keras.unroll"):  # each compile takes seconds
        inference = kernels.build(name, shape, weights=weights)
        computed[name] = {"forward": inference.forward().tolist(), "predicted": [inference.predicted_kernel],
                          "observed": inference.observed_kernel()}
    train = kernels.build("keras.cudnn_auto", shape, phase="train", weights=weights)
    computed["keras.cudnn_auto"].update(predicted=[*computed["keras.cudnn_auto"]["predicted"], train.predicted_kernel],
                                        grads=[[{k: v.tolist() for k, v in d.items()} for d in row]
                                               for row in train.grads()])
    dropout = kernels.build("keras.recurrent_dropout", shape, phase="train", weights=weights)
    draws = [np.concatenate([g.ravel() for g in dropout.grads()[0][0].values()]).tolist() for _ in range(2)]
    quick = LSTMShape(batch=1, timesteps=8, features=8, hidden=16)
    k = kernels.build("keras.relu", shape, weights=weights)
    m = timing.measure(k.step, sync=k.sync, warmup=1, min_time=0.01, max_time=0.2, min_samples=3)
    print("RESULT" + json.dumps({
        "backend": keras_backend(), "computed": computed, "draws": draws, "sync": m.sync, "samples": len(m.samples),
        "bf16": kernels.build("keras.cudnn_auto", quick, "cpu", "bf16", "inference").compute_dtype,
        "key": dict(contract.Point("keras.relu", quick).key_fields()),
        "jax": "jax" in sys.modules, "torch_profiler_used": "torch.profiler" in sys.modules}))
""")


@pytest.fixture(scope="module")
def jax_backend(request, tmp_path_factory) -> dict:
    """What `JAX_BACKEND_CHILD` printed, computed once per test run."""
    from test_keras_kernels import backend_child

    return backend_child(request, tmp_path_factory, "keras_jax_backend", JAX_BACKEND_CHILD, KERAS_BACKEND="jax",
                         JAX_PLATFORMS="cpu")


def test_keras_on_jax_matches_the_reference(jax_backend):
    from test_keras_kernels import FP32, STACKED_BIDIRECTIONAL, assert_grads_close, reference

    assert jax_backend["backend"] == "jax" and jax_backend["jax"]
    weights = LSTMWeights.random(STACKED_BIDIRECTIONAL, seed=9)
    expected, expected_grads = reference(STACKED_BIDIRECTIONAL, weights)
    for name in ("keras.cudnn_auto", "keras.impl1", "keras.unroll"):
        np.testing.assert_allclose(np.array(jax_backend["computed"][name]["forward"]), expected, **FP32, err_msg=name)
    grads = jax_backend["computed"]["keras.cudnn_auto"]["grads"]
    assert_grads_close([[{k: np.array(v) for k, v in d.items()} for d in row] for row in grads], expected_grads, **FP32)
    relu = np.array(jax_backend["computed"]["keras.relu"]["forward"])
    assert not np.allclose(relu, expected, **FP32)  # a ReLU is not the standard LSTM: the weights really matter


def test_keras_on_jax_predicts_a_compiled_loop_and_observes_nothing_on_a_cpu(jax_backend):
    """No GPU for jax here: every kernel is Keras's generic loop, which XLA compiles (`lax.scan`: a while loop), or
    the unrolled steps; the torch profiler cannot see jax, so nothing is observed, never a guess."""
    computed = jax_backend["computed"]
    assert computed["keras.cudnn_auto"]["predicted"] == ["framework-loop", "framework-loop"]  # inference, train
    for name in ("keras.impl1", "keras.relu"):
        assert computed[name]["predicted"] == ["framework-loop"], name
    assert computed["keras.unroll"]["predicted"] == ["unrolled"]
    assert all(found["observed"] == "" for found in computed.values())


def test_a_jax_step_is_timed_with_a_sync_that_waits_for_jax(jax_backend):
    assert jax_backend["sync"] == "JaxSync" and jax_backend["samples"] >= 3
    assert jax_backend["bf16"] == "bfloat16"


def test_recurrent_dropout_draws_fresh_masks_every_jax_training_call(jax_backend):
    first, second = (np.array(d) for d in jax_backend["draws"])
    assert not np.allclose(first, second)  # the seed state moves on, as Keras's own trainer moves it


def test_a_jax_row_is_stored_apart_from_a_torch_row(jax_backend):
    """The backend is part of a row's key: a jax run never resumes, replaces or pairs with a torch run's rows."""
    key = jax_backend["key"]
    assert key["kernel"] == "keras.relu" and key["backend"] == "jax"


@pytest.mark.parametrize(("text", "kernel"), [
    ('%0 = stablehlo.custom_call @cudnn_rnn(%arg0, %arg1) {api_version = 2 : i32}', "cudnn"),
    ('%3:4 = stablehlo.while(%iterArg = %c) : tensor<i32>\n cond {', "framework-loop"),
    ("%1 = stablehlo.dot_general %0, %arg1\n%2 = stablehlo.tanh %1", "unrolled"),
])
def test_the_lowered_program_tells_which_kernel_runs(text, kernel):
    assert keras_kernels.hlo_kernel(text) == kernel
