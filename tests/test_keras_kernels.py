"""The Keras kernels compute the LSTM they claim to, with the weights they are given, and report what ran.

The reference is torch's `nn.LSTM` in float64 loaded with the same `LSTMWeights`: the standard
Keras kernels must match its outputs and training-step gradients to float32 accuracy; keras.relu
must not (so a wrong weight mapping would be caught, not averaged away).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from conftest import import_blocker
from torch import nn

keras = pytest.importorskip("keras")

from lstmstudy import kernels, timing  # noqa: E402
from lstmstudy.backends import ISA_CAPS, isa_cap, keras_backend  # noqa: E402
from lstmstudy.errors import Skip  # noqa: E402
from lstmstudy.kernels import keras_kernels  # noqa: E402
from lstmstudy.kernels.built import DTYPE_NAMES, LSTMWeights, PrecisionMismatch, make_inputs  # noqa: E402
from lstmstudy.kernels.criteria import explain_cudnn  # noqa: E402
from lstmstudy.observe import keras_loop  # noqa: E402
from lstmstudy.shapes import LSTMShape  # noqa: E402

SINGLE = LSTMShape(batch=2, timesteps=5, features=3, hidden=4)
STACKED_BIDIRECTIONAL = LSTMShape(batch=2, timesteps=4, features=3, hidden=4, layers=2, bidirectional=True)
KERAS = [name for name in kernels.names() if name.startswith("keras.")]
STANDARD = [name for name in KERAS if kernels.spec(name).standard]
FP32 = {"rtol": 1e-4, "atol": 2e-5}


def reference(shape: LSTMShape, weights: LSTMWeights) -> tuple[np.ndarray, list[list[dict[str, np.ndarray]]]]:
    """Output and MSE-loss gradients of nn.LSTM (float64) with these weights, on `make_inputs(shape)`."""
    lstm = nn.LSTM(shape.features, shape.hidden, shape.layers, batch_first=True,
                   bidirectional=shape.bidirectional).double()
    suffixes = [[f"_l{layer}" + ("_reverse" if direction else "") for direction in range(shape.directions)]
                for layer in range(shape.layers)]
    with torch.no_grad():
        for layer, directions in enumerate(weights.layers):
            for direction, w in enumerate(directions):
                for key, value in w.items():
                    getattr(lstm, key.replace("w_", "weight_").replace("b_", "bias_") + suffixes[layer][direction]
                            ).copy_(torch.from_numpy(value))
    x, target = make_inputs(shape)
    out, _ = lstm(torch.from_numpy(x).double())
    torch.mean((out - torch.from_numpy(target).double()) ** 2).backward()
    grads = [[{key: getattr(lstm, key.replace("w_", "weight_").replace("b_", "bias_") + suffix).grad.numpy()
               for key in ("w_ih", "w_hh", "b_ih", "b_hh")} for suffix in row] for row in suffixes]
    return out.detach().numpy(), grads


def build_16bit(name: str, shape: LSTMShape, precision: str, **kwargs):
    """`kernels.build`, skipped with its reason where TensorFlow cannot run 16 bits under an ISA cap, and only
    there: anywhere else a skipped 16-bit build fails the test."""
    try:
        return kernels.build(name, shape, precision=precision, **kwargs)
    except Skip as skip:
        if precision == "fp32" or not isa_cap() or keras_backend() != "tensorflow":
            raise
        pytest.skip(str(skip))


def assert_grads_close(got, expected, **tolerance) -> None:
    for layer, (got_row, expected_row) in enumerate(zip(got, expected, strict=True)):
        for direction, (g, e) in enumerate(zip(got_row, expected_row, strict=True)):
            for key in g:
                np.testing.assert_allclose(g[key], e[key], err_msg=f"layer {layer} direction {direction} {key}",
                                           **tolerance)


@pytest.mark.parametrize("shape", [SINGLE, STACKED_BIDIRECTIONAL], ids=["single", "2-layer-bidirectional"])
@pytest.mark.parametrize("name", STANDARD)
def test_standard_kernels_match_the_reference_forward(name, shape):
    weights = LSTMWeights.random(shape, seed=3)
    expected, _ = reference(shape, weights)
    np.testing.assert_allclose(kernels.build(name, shape, weights=weights).forward(), expected, **FP32)


@pytest.mark.parametrize("name", [n for n in STANDARD if n != "keras.recurrent_dropout"])
def test_standard_kernels_match_the_reference_gradients(name):
    shape = STACKED_BIDIRECTIONAL
    weights = LSTMWeights.random(shape, seed=4)
    _, expected = reference(shape, weights)
    k = kernels.build(name, shape, phase="train", weights=weights)
    got = k.grads()
    assert all(set(d) == {"w_ih", "w_hh", "b_ih", "b_hh"} for row in got for d in row)
    assert_grads_close(got, expected, **FP32)


def test_recurrent_dropout_drops_out_in_the_train_step_only():
    """Its inference is the standard LSTM (checked above); its train step thins h(t-1), so gradients differ."""
    weights = LSTMWeights.random(SINGLE, seed=5)
    _, expected = reference(SINGLE, weights)
    k = kernels.build("keras.recurrent_dropout", SINGLE, phase="train", weights=weights)
    with pytest.raises(AssertionError):
        assert_grads_close(k.grads(), expected, **FP32)


def test_relu_is_not_the_standard_lstm():
    weights = LSTMWeights.random(SINGLE, seed=6)
    expected, _ = reference(SINGLE, weights)
    assert not kernels.spec("keras.relu").standard
    assert not np.allclose(kernels.build("keras.relu", SINGLE, weights=weights).forward(), expected, **FP32)


def test_no_bias_is_the_lstm_with_zero_biases():
    weights = LSTMWeights.random(SINGLE, seed=7)
    for w in weights.layers[0]:
        w["b_ih"][:] = 0.0
        w["b_hh"][:] = 0.0
    expected, expected_grads = reference(SINGLE, weights)
    np.testing.assert_allclose(kernels.build("keras.no_bias", SINGLE, weights=weights).forward(), expected, **FP32)
    grads = kernels.build("keras.no_bias", SINGLE, phase="train", weights=weights).grads()
    assert set(grads[0][0]) == {"w_ih", "w_hh"}  # no bias, no bias gradient
    assert_grads_close(grads, expected_grads, **FP32)


@pytest.mark.isa
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_runs_close_to_the_reference(precision):
    weights = LSTMWeights.random(SINGLE, seed=8)
    expected, _ = reference(SINGLE, weights)
    k = build_16bit("keras.cudnn_auto", SINGLE, precision, weights=weights)
    out = k.forward()
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, expected, atol=5e-2 if precision == "bf16" else 5e-3)
    assert not np.array_equal(out, kernels.build("keras.cudnn_auto", SINGLE, weights=weights).forward())


@pytest.fixture
def probe(monkeypatch):
    """`keras_kernels.tensorflow_refuses` with its child's script replaced (and the process's answers forgotten)."""
    keras_kernels.tensorflow_refuses.cache_clear()
    for name in ISA_CAPS:
        monkeypatch.delenv(name, raising=False)
    yield lambda script: monkeypatch.setattr(keras_kernels, "_PROBE", script)
    keras_kernels.tensorflow_refuses.cache_clear()


@pytest.mark.skipif(keras_backend() != "tensorflow", reason="the probe is for Keras on TensorFlow")
def test_a_16bit_lstm_tensorflow_dies_on_under_an_isa_cap_is_skipped_with_the_reason(probe, monkeypatch):
    """TensorFlow's CPU check ignores ONEDNN_MAX_CPU_ISA: where a capped oneDNN kills it, a child dies instead of
    this process, and the row is skipped saying why."""
    probe("import os; os.abort()")  # what TensorFlow does with bf16 under the cap on an AVX-512 CPU
    cpu = torch.device("cpu")
    assert keras_kernels.unavailable(cpu, "bf16") is None  # no cap: no child, whatever it would do
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert keras_kernels.unavailable(cpu, "fp32") is None  # 32 bits never asked
    reason = keras_kernels.unavailable(cpu, "bf16")
    assert reason.startswith("TensorFlow died (SIGABRT) running a bf16 LSTM with ONEDNN_MAX_CPU_ISA=AVX2")
    with pytest.raises(Skip, match=r"^keras.cudnn_auto at bf16 on cpu: TensorFlow died \(SIGABRT\)"):
        kernels.build("keras.cudnn_auto", SINGLE, precision="bf16")
    probe("raise SystemExit(3)")  # a child that fails without dying: the build here says why, not the probe
    keras_kernels.tensorflow_refuses.cache_clear()
    assert keras_kernels.unavailable(cpu, "fp16") is None


def test_tensorflow_graphs_predict_and_observe_nothing_on_this_cpu():
    """Keras tries cuDNN for keras.cudnn_auto, but without a GPU its graph holds the generic while loop; a
    traced graph is a prediction (TensorFlow places its ops), so nothing is stored as observed."""
    built = {name: kernels.build(name, SINGLE, phase="train") for name in ("keras.cudnn_auto", "keras.unroll",
                                                                           "keras.impl1")}
    assert {name: k.predicted_kernel for name, k in built.items()} == {
        "keras.cudnn_auto": "framework-loop", "keras.unroll": "unrolled", "keras.impl1": "framework-loop"}
    assert {k.observed_kernel() for k in built.values()} == {""}


def test_the_step_is_timed_with_a_real_tensorflow_sync():
    k = kernels.build("keras.generic", SINGLE, phase="train")
    m = timing.measure(k.step, sync=k.sync, warmup=1, min_samples=3, max_samples=3, min_time=0, max_time=5)
    assert m.n == 3 and m.sync == "sync_devices"


def test_unavailable_says_why_there_is_no_gpu():
    reason = kernels.spec("keras.cudnn_auto").unavailable(torch.device("cuda"), "fp32")
    if not torch.cuda.is_available():  # neither framework can see a GPU here
        assert reason is not None and ("GPU" in reason or "CUDA" in reason)
    assert kernels.spec("keras.cudnn_auto").unavailable(torch.device("cpu"), "bf16") is None


def test_explains_the_blog_posts_model():
    """LSTM(64, LeakyReLU) -> Dropout -> LSTM(32) -> Dense: the activation blocks the first layer only."""
    model = keras.Sequential([
        keras.Input((10, 3)),
        keras.layers.LSTM(64, activation=keras.layers.LeakyReLU(0.05), return_sequences=True),
        keras.layers.Dropout(0.2),
        keras.layers.LSTM(32),
        keras.layers.Dense(1),
    ])
    first, second = explain_cudnn(model)
    assert first.codes == ("activation", "no_gpu") and "LeakyReLU" in first.reasons[0].message
    assert second.codes == ("no_gpu",) and second.eligible_ignoring_device
    on_gpu = explain_cudnn(model, device="cuda")
    assert [e.kernel for e in on_gpu] == [keras_loop(keras_backend(), unroll=False), "cudnn"]
    relu = keras.Sequential([keras.Input((10, 3)), keras.layers.LSTM(64, activation="relu")])
    assert "activation is 'relu'; cuDNN only implements tanh" in explain_cudnn(relu)[0].reasons[0].message


#: One fresh process with Keras on its torch backend and TensorFlow refused at import, as on a GPU node without
#: it (the next two tests read its answer: a Keras import costs seconds). Keras's own `Bidirectional` probes for
#: TensorFlow (and copes when it is missing), so the blocker makes an import fail rather than hiding the package.
TORCH_BACKEND_CHILD = import_blocker(refused=("tensorflow",)) + textwrap.dedent("""
    import json
    from lstmstudy import kernels
    from lstmstudy.backends import keras_backend
    from lstmstudy.kernels import build, keras_kernels
    from lstmstudy.kernels.built import LSTMWeights
    from lstmstudy.shapes import LSTMShape

    devices = []
    ieee_fp32 = keras_kernels.ieee_fp32
    keras_kernels.ieee_fp32 = lambda device: devices.append(str(device)) or ieee_fp32(device)
    shape = LSTMShape(batch=2, timesteps=4, features=3, hidden=4, layers=2, bidirectional=True)
    dtypes = {}
    for name in ("keras.cudnn_auto", "keras.relu"):
        for precision in ("fp32", "bf16"):
            for phase in ("inference", "train"):
                k = kernels.build(name, shape, "cpu", precision, phase)
                k.step()
                k.forward()
                k.observed_kernel()
                dtypes[f"{name} {precision} {phase}"] = k.compute_dtype
    ieee = len(devices), sorted(set(devices))
    weights = LSTMWeights.random(shape, seed=9)
    computed = {}
    for name in ("keras.cudnn_auto", "keras.impl1"):
        inference = build(name, shape, weights=weights)
        train = build(name, shape, phase="train", weights=weights)
        computed[name] = {"forward": inference.forward().tolist(), "grads": [[{k: v.tolist() for k, v in d.items()}
                          for d in row] for row in train.grads()], "observed": train.observed_kernel()}
    print("RESULT" + json.dumps({"backend": keras_backend(), "dtypes": dtypes, "ieee_calls": ieee[0],
                                 "ieee_devices": ieee[1], "computed": computed,
                                 "tensorflow": [m for m in sys.modules if m.split(".")[0] == "tensorflow"]}))
""")


def backend_child(request, tmp_path_factory, name: str, script: str, **env: str) -> dict:
    """What a child process running `script` under `env` (a Keras backend) printed after RESULT, computed once per
    test run under `name`."""
    from conftest import once_per_run

    def run() -> dict:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env={**os.environ, **env}, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.split("RESULT", 1)[1])

    return once_per_run(request.config, tmp_path_factory, name, run)


@pytest.fixture(scope="module")
def torch_backend(request, tmp_path_factory) -> dict:
    """What `TORCH_BACKEND_CHILD` printed, computed once per test run."""
    return backend_child(request, tmp_path_factory, "keras_torch_backend", TORCH_BACKEND_CHILD, KERAS_BACKEND="torch")


def test_keras_on_torch_matches_the_reference(torch_backend):
    """The torch-backend path (a GPU machine without TensorFlow would take it)."""
    assert torch_backend["backend"] == "torch"
    weights = LSTMWeights.random(STACKED_BIDIRECTIONAL, seed=9)
    expected, expected_grads = reference(STACKED_BIDIRECTIONAL, weights)
    for name, got in torch_backend["computed"].items():
        assert got["observed"] == "python-op-loop"
        np.testing.assert_allclose(np.array(got["forward"]), expected, **FP32, err_msg=name)
        assert_grads_close([[{k: np.array(v) for k, v in d.items()} for d in row] for row in got["grads"]],
                           expected_grads, **FP32)


@pytest.mark.isa
@pytest.mark.parametrize("phase", ["inference", "train"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_compute_dtype_is_the_policy_dtype(precision, phase):
    """A mixed policy computes in its 16-bit dtype, and the model's output says so."""
    assert build_16bit("keras.cudnn_auto", SINGLE, precision, phase=phase).compute_dtype == DTYPE_NAMES[precision]


def test_an_output_in_another_dtype_is_an_error(monkeypatch):
    monkeypatch.setitem(keras_kernels.POLICIES, "bf16", "mixed_float16")  # a layer that computes fp16 for bf16
    with pytest.raises(PrecisionMismatch, match="^keras.relu at bf16: the LSTM computed in float16, not bfloat16$"):
        kernels.build("keras.relu", SINGLE, precision="bf16")


def test_backend_names_the_keras_backend():
    assert keras_backend() == keras.backend.backend()


def test_the_torch_backend_never_imports_tensorflow(torch_backend):
    """A GPU node without TensorFlow: building, stepping and profiling Keras kernels on torch must not need it.
    Every torch step runs under `ieee_fp32`."""
    assert torch_backend["backend"] == "torch" and torch_backend["tensorflow"] == []
    assert torch_backend["dtypes"] == {f"{name} {precision} {phase}": DTYPE_NAMES[precision]
                                       for name in ("keras.cudnn_auto", "keras.relu")
                                       for precision in ("fp32", "bf16") for phase in ("inference", "train")}
    # build, step, forward of 8 kernels
    assert torch_backend["ieee_calls"] >= 3 * 8 and torch_backend["ieee_devices"] == ["cpu"]


@pytest.mark.gpu
@pytest.mark.skipif(keras_backend() != "torch", reason="the profiler observes Keras's kernels on torch only")
def test_cudnn_auto_runs_cudnn_on_the_gpu_and_agrees():
    """What ran is what the profiler saw: a missing observation fails, never falls back on the prediction."""
    weights = LSTMWeights.random(STACKED_BIDIRECTIONAL, seed=10)
    expected, expected_grads = reference(STACKED_BIDIRECTIONAL, weights)
    k = kernels.build("keras.cudnn_auto", STACKED_BIDIRECTIONAL, device="cuda", phase="train", weights=weights)
    assert k.observed_kernel() == "cudnn"
    assert_grads_close(k.grads(), expected_grads, rtol=1e-3, atol=1e-4)
    generic = kernels.build("keras.generic", STACKED_BIDIRECTIONAL, device="cuda", weights=weights)
    assert generic.observed_kernel() == "python-op-loop"
    np.testing.assert_allclose(generic.forward(), expected, rtol=1e-3, atol=1e-4)


def test_keras_kernels_are_registered_with_their_contract():
    assert set(KERAS) == {"keras.cudnn_auto", "keras.generic", "keras.relu", "keras.recurrent_dropout",
                          "keras.unroll", "keras.no_bias", "keras.impl1", "keras.impl2"}
    assert set(STANDARD) == set(KERAS) - {"keras.relu", "keras.no_bias"}
    assert keras_kernels.POLICIES["bf16"] == "mixed_bfloat16"
