"""`lstmstudy explain` answers for the backend the user's own Keras would run on, any of Keras 3's three: the one
`KERAS_BACKEND` names, else keras.json's, else Keras's default; never one chosen by what this process can import.
Each answer names the backend and what chose it, and says what the other backends would do where they differ.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import import_blocker

from lstmstudy.backends import KERAS_DEFAULT, user_backend

ROOT = Path(__file__).resolve().parent.parent


def _layer(cls: str, **config) -> dict:
    return {"module": "keras.layers", "class_name": cls, "config": {"name": cls.lower(), **config}}


@pytest.fixture(scope="module")
def masked_model(tmp_path_factory) -> Path:
    """A saved .keras model, written as Keras writes its config: a Masking layer, then an LSTM and a GRU it reaches."""
    path = tmp_path_factory.mktemp("models") / "masked.keras"
    layers = [_layer("InputLayer", batch_shape=[None, 5, 3]), _layer("Masking"),
              _layer("LSTM", units=4, return_sequences=True), _layer("GRU", units=3)]
    config = {"module": "keras", "class_name": "Sequential", "config": {"name": "masked", "layers": layers}}
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", json.dumps(config))
    return path


def test_keras_backend_wins_then_keras_json_then_keras_default(tmp_path):
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "jax", "floatx": "float32"}))
    assert user_backend({"KERAS_BACKEND": "torch", "KERAS_HOME": str(tmp_path)}) == ("torch", "KERAS_BACKEND=torch")
    assert user_backend({"KERAS_HOME": str(tmp_path)}) == ("jax", f"backend in {tmp_path / 'keras.json'}")
    home = tmp_path / "home"
    (home / ".keras").mkdir(parents=True)
    (home / ".keras" / "keras.json").write_text('{"backend": "torch"}')
    assert user_backend({"HOME": str(home)}).name == "torch"  # ~/.keras where KERAS_HOME is not set
    (tmp_path / "keras.json").write_text("{not json")  # Keras reads a broken file as an empty one
    assert user_backend({"KERAS_HOME": str(tmp_path)}).name == KERAS_DEFAULT
    assert user_backend({"KERAS_HOME": str(tmp_path / "none")}).chosen_by.startswith("Keras's default")


def _explain(path: Path, keras_home: Path, *, prelude: str = "", **env: str) -> tuple[int, dict, str]:
    """`lstmstudy explain PATH --json` in a fresh process, with no KERAS_BACKEND but `env`'s and keras.json (if any)
    in `keras_home`; `prelude` runs first (to refuse TensorFlow at import)."""
    script = prelude + "\nimport sys\nfrom lstmstudy.cli import main\nsys.exit(main(sys.argv[1:]))"
    environ = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    done = subprocess.run([sys.executable, "-c", script, "explain", str(path), "--json"], capture_output=True,
                          text=True, env={**environ, "KERAS_HOME": str(keras_home), **env}, timeout=120, cwd=ROOT)
    return done.returncode, json.loads(done.stdout), done.stderr


def _kernels(answer: dict) -> dict[str, tuple[str, list[str]]]:
    layers = answer["models"][0]["layers"]
    return {layer["layer"]: (layer["kernel"], sorted(r["code"] for r in layer["reasons"])) for layer in layers}


@pytest.mark.parametrize(("backend", "status", "expected"), [
    ("tensorflow", 0, {"lstm": ("cudnn", []), "gru": ("cudnn", [])}),  # right-padded masks keep cuDNN there
    ("torch", 1, {"lstm": ("python-op-loop", ["mask_torch_backend"]),
                  "gru": ("python-op-loop", ["mask_torch_backend"])}),
    ("jax", 1, {"lstm": ("framework-loop", ["mask_jax_backend"]), "gru": ("framework-loop", ["jax_gru",
                                                                                          "mask_jax_backend"])}),
])
def test_each_backend_is_explained_and_named_with_what_chose_it(masked_model, tmp_path, backend, status, expected):
    code, answer, _ = _explain(masked_model, tmp_path, KERAS_BACKEND=backend)
    assert code == status and answer["exit_status"] == status
    assert answer["keras_backend"] == {"name": backend, "chosen_by": f"KERAS_BACKEND={backend}"}
    assert _kernels(answer) == expected
    others = [n["message"] for layer in answer["models"][0]["layers"] for n in layer["notes"]
              if n["code"] == "other_backend"]
    # what the other backends would do, where it differs: tensorflow's cuDNN against the other two's loops
    assert len(others) == (4 if backend == "tensorflow" else 2), others


def test_keras_json_chooses_where_keras_backend_is_unset(masked_model, tmp_path):
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "jax"}))
    code, answer, _ = _explain(masked_model, tmp_path)
    assert answer["keras_backend"] == {"name": "jax", "chosen_by": f"backend in {tmp_path / 'keras.json'}"}
    assert code == 1


def test_a_missing_tensorflow_does_not_move_the_answer_to_torch(masked_model, tmp_path):
    """Pre-commit's own environment has no TensorFlow: a TensorFlow user's masked model still gets the TensorFlow
    answer (cuDNN for right-padded masks), not the torch backend's refusal of any mask."""
    code, answer, stderr = _explain(masked_model, tmp_path, prelude=import_blocker(missing=("tensorflow",)))
    assert answer["keras_backend"]["name"] == "tensorflow" and "default" in answer["keras_backend"]["chosen_by"]
    assert code == 0 and "torch backend" not in stderr


def test_the_text_answer_names_the_backend_and_what_chose_it(masked_model, tmp_path):
    environ = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    done = subprocess.run([sys.executable, "-m", "lstmstudy", "explain", str(masked_model)], capture_output=True,
                          text=True, env={**environ, "KERAS_HOME": str(tmp_path), "KERAS_BACKEND": "jax"}, timeout=120,
                          cwd=ROOT)
    assert "on Keras's jax backend (KERAS_BACKEND=jax)" in done.stdout.splitlines()[0]
    assert "on Keras's tensorflow backend it would run cuDNN's fused kernel" in done.stdout


def test_a_backend_that_runs_nothing_on_a_gpu_is_one_line(masked_model, tmp_path):
    environ = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    done = subprocess.run([sys.executable, "-m", "lstmstudy", "explain", str(masked_model)], capture_output=True,
                          text=True, env={**environ, "KERAS_HOME": str(tmp_path), "KERAS_BACKEND": "numpy"},
                          timeout=120, cwd=ROOT)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "numpy backend (KERAS_BACKEND=numpy) runs no recurrent layer on a GPU" in done.stderr


@pytest.mark.parametrize(("env", "keras_json", "said"), [
    ({"KERAS_BACKEND": "JAX"}, None, "Keras has no backend named 'JAX' (KERAS_BACKEND=JAX)"),
    ({}, {"backend": ""}, "Keras has no backend named '' (backend in "),
    ({}, {"backend": None}, "Keras has no backend named 'None' (backend in "),
])
def test_a_backend_name_keras_would_refuse_is_named_as_such(masked_model, tmp_path, env, keras_json, said):
    """Keras takes the name as given (no lower-casing) and fails at import; so does the answer, in one line."""
    if keras_json is not None:
        (tmp_path / "keras.json").write_text(json.dumps(keras_json))
    environ = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    done = subprocess.run([sys.executable, "-m", "lstmstudy", "explain", str(masked_model)], capture_output=True,
                          text=True, env={**environ, "KERAS_HOME": str(tmp_path), **env}, timeout=120, cwd=ROOT)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and said in done.stderr, done.stderr


def test_a_keras_before_3_14_has_no_cudnn_path_on_jax():
    """Keras added its jax cuDNN LSTM in 3.14 (keras/src/backend/jax/rnn.py of each release); jax has no cuDNN GRU."""
    from lstmstudy.cudnn_rules import KerasRecurrent, keras_jax_reasons

    lstm, gru = KerasRecurrent("LSTM", "LSTMCell"), KerasRecurrent("GRU", "GRUCell")
    assert [r.code for r in keras_jax_reasons(lstm, "3.13.2")] == ["keras_jax_no_cudnn"]
    assert [r.code for r in keras_jax_reasons(gru, "3.10.0")] == ["keras_jax_no_cudnn"]
    for version in ("3.14.0", "3.15.1", None):  # None: no Keras installed here, so a current one is assumed
        assert keras_jax_reasons(lstm, version) == []
        assert [r.code for r in keras_jax_reasons(gru, version)] == ["jax_gru"]
        half = KerasRecurrent("LSTM", "LSTMCell", compute_dtype="float16")
        assert [r.code for r in keras_jax_reasons(half, version)] == ["jax_dtype"]


def test_an_unknown_keras_version_is_taken_as_current_by_every_rule():
    from lstmstudy.cudnn_rules import JAX_CUDNN_SINCE, JAX_GRU_SCAN_SINCE, keras_since, runs_own_scan

    assert keras_since(None, JAX_CUDNN_SINCE) and keras_since(None, JAX_GRU_SCAN_SINCE)
    assert keras_since("3.14.0", JAX_CUDNN_SINCE) and not keras_since("3.14.0", JAX_GRU_SCAN_SINCE)
    assert keras_since("3.15.1rc1", JAX_GRU_SCAN_SINCE) and not keras_since("3.9.2", JAX_CUDNN_SINCE)
    assert runs_own_scan("jax", "GRU", None) and not runs_own_scan("jax", "GRU", "3.14.2")
    assert not runs_own_scan("tensorflow", "GRU", None) and not runs_own_scan("jax", "LSTM", None)
