"""`lstmstudy.saved_config`: a saved model explained from its config alone must say what loading it through Keras
says (`watch.explain_saved_model`, which asks Keras's own mask propagation and `explain_cudnn`), on both Keras
backends, and `lstmstudy explain` must then import no framework.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lstmstudy.saved_config import KERAS_LAYERS, MASK_PASSERS, explain_saved_config

keras = pytest.importorskip("keras")
L = keras.layers
ROOT = Path(__file__).resolve().parent.parent


def _models() -> dict[str, object]:
    """Models of the kinds users save: functional and Sequential, Bidirectional, masks made upstream and given
    explicitly, nested models, layers with no fused form, and settings that break cuDNN's criteria."""
    words, explicit = keras.Input((6,), dtype="int32"), keras.Input((6,), dtype="bool")
    embedded = L.Embedding(50, 8, mask_zero=True)(words)
    both = L.Bidirectional(L.LSTM(4, return_sequences=True))(embedded)
    gru = L.GRU(3, recurrent_dropout=0.2)(L.Dense(5)(both), mask=explicit)
    numbers = keras.Input((6, 2))
    plain = L.LSTM(3, name="plain")(numbers)
    functional = keras.Model([words, explicit, numbers],
                             L.Concatenate()([gru, plain, L.RNN(L.LSTMCell(2))(both)]))
    sequential = keras.Sequential([keras.Input((5, 3)), L.Masking(), L.Dropout(0.1),
                                   L.LSTM(4, activation="relu", return_sequences=True),
                                   L.Conv1D(2, 1), L.LSTM(2, unroll=True)])
    inner = keras.Sequential([keras.Input((6, 8)), L.LayerNormalization(), L.GRU(4, reset_after=False)],
                             name="encoder")
    ids = keras.Input((6,), dtype="int32")
    nested = keras.Model(ids, inner(L.Embedding(9, 8, mask_zero=True)(ids)))
    unmasked = keras.Sequential([keras.Input((6,), dtype="int32"), L.Embedding(9, 8),
                                 L.Bidirectional(L.GRU(2, use_bias=False)), L.Dense(1)])
    conv = keras.Sequential([keras.Input((3, 6, 6, 1)), L.ConvLSTM2D(2, 3, return_sequences=True),
                             L.TimeDistributed(L.Flatten()), L.SimpleRNN(2)])
    mixed = keras.Sequential([keras.Input((5, 3)), L.LSTM(4, dtype="mixed_float16", return_sequences=True),
                              L.LSTM(2, dtype="mixed_bfloat16")])  # jax's cuDNN LSTM is float32 only
    return {"functional": functional, "sequential": sequential, "nested": nested, "unmasked": unmasked,
            "conv": conv, "mixed": mixed}


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("models")
    paths = []
    for name, model in _models().items():
        for suffix in (".keras", ".h5"):
            model.save(folder / f"{name}{suffix}")
            paths.append(folder / f"{name}{suffix}")
    return paths


def _named(saved: list[Path], name: str) -> Path:
    return next(path for path in saved if path.name == name)


def _summary(findings) -> list[tuple]:
    """Each finding's kernel, reasons, whether it says right-padded masks only, and what the other backends do."""
    return [(f.layer, f.kernel, sorted(r.code for r in f.reasons),
             "mask_right_padded_only" in [n.code for n in f.notes],
             [n.message for n in f.notes if n.code == "other_backend"]) for f in findings]


_KERAS_CHILD = """
import json, sys
from lstmstudy.errors import StudyError
from lstmstudy.watch import explain_saved_model
from test_saved_config import _summary
answers = {}
for path in sys.argv[1:]:
    try:
        answers[path] = _summary(explain_saved_model(path))
    except StudyError as error:
        answers[path] = str(error)
print("JSON" + json.dumps(answers))
"""


@pytest.mark.parametrize("backend", ["tensorflow", "torch", "jax"])
def test_the_config_says_what_keras_says_on_each_backend(saved, tmp_path, backend):
    """Each model is loaded through Keras on `backend` in a child process (a process has one Keras backend)."""
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests"), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", _KERAS_CHILD, *map(str, saved)], env=env, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("JSON")), None)
    assert line is not None, done.stderr[-3000:]
    by_keras = json.loads(line[4:])
    compared = 0
    for path in saved:
        from_config = [list(row) for row in _summary(explain_saved_config(path, backend=backend,
                                                                          results_root=tmp_path)[0])]
        if isinstance(by_keras[str(path)], str):  # Keras 3.15 cannot load an .h5 whose graph holds a mask op
            assert path.suffix == ".h5" and "Unknown layer: 'NotEqual'" in by_keras[str(path)], by_keras[str(path)]
            continue
        assert from_config == [list(row) for row in by_keras[str(path)]], path.name
        compared += 1
    assert compared >= 9


def test_masks_reach_the_layers_keras_propagates_them_to(saved, tmp_path):
    """The functional model: the embedding's mask reaches both directions of the Bidirectional and (through a Dense)
    the RNN, an explicit mask= the GRU; the LSTM on the other input gets none (names as Keras numbered them)."""
    findings = explain_saved_config(saved[0], backend="torch", results_root=tmp_path)[0]
    kinds = {f.layer.split("/")[-1].rstrip("_0123456789"): f for f in findings}
    assert [r.code for r in kinds["forward_lstm"].reasons] == ["mask_torch_backend"]
    assert any(n.code == "other_backend" for n in kinds["backward_lstm"].notes)
    assert sorted(r.code for r in kinds["gru"].reasons) == ["mask_torch_backend", "recurrent_dropout"]
    assert kinds["plain"].fused and kinds["rnn"].kernel == "python-op-loop"


def test_mixed_precision_keeps_cudnn_on_tensorflow_and_torch_not_on_jax(saved, tmp_path):
    """jax's cuDNN LSTM takes float32 only; the answer on each backend says so where another backend differs."""
    path = _named(saved, "mixed.keras")
    for backend, kernel, codes in (("tensorflow", "cudnn", []), ("torch", "cudnn", []),
                                   ("jax", "framework-loop", ["jax_dtype"])):
        findings = explain_saved_config(path, backend=backend, results_root=tmp_path)[0]
        assert [(f.kernel, [r.code for r in f.reasons]) for f in findings] == [(kernel, codes)] * 2, backend
        others = [n.message for n in findings[0].notes if n.code == "other_backend"]
        assert len(others) == (2 if backend == "jax" else 1), others
        if backend != "jax":
            assert others[0].startswith("on Keras's jax backend it would run")
            assert "computes in float16, which jax's cuDNN LSTM" in others[0]


def test_layers_with_no_fused_form_get_no_fix_that_changes_the_model(saved, tmp_path):
    found = explain_saved_config(_named(saved, "conv.keras"), backend="tensorflow", results_root=tmp_path)[0]
    conv = {f.layer: f for f in found}
    for name in ("conv_lstm2d", "simple_rnn"):
        assert [r.code for r in conv[name].reasons] == ["no_fused_form"] and conv[name].fixes == ()
        assert "has no fused form" in str(conv[name])
    functional = {f.layer: f for f in explain_saved_config(saved[0], backend="tensorflow", results_root=tmp_path)[0]}
    assert "keras.layers.LSTM for LSTMCell" in functional["rnn"].fixes[0]  # RNN(LSTMCell) has the LSTM as twin


def test_custom_classes_are_named_not_a_load_failure(tmp_path):
    class MinimalCell(L.Layer):
        def __init__(self, units=3, **options):
            super().__init__(**options)
            self.units, self.state_size = units, units

        def build(self, shape):
            self.kernel = self.add_weight(shape=(shape[-1], self.units))

        def call(self, x, states):
            return x @ self.kernel + states[0], [x @ self.kernel + states[0]]

    class Subclassed(keras.Model):
        def __init__(self, **options):
            super().__init__(**options)
            self.lstm = L.LSTM(3)

        def call(self, x):
            return self.lstm(x)

    keras.Sequential([keras.Input((5, 3)), L.RNN(MinimalCell())]).save(tmp_path / "cell.keras")
    subclassed = Subclassed()
    subclassed(keras.ops.ones((1, 5, 3)))
    subclassed.save(tmp_path / "subclassed.keras")
    (cell,), _ = explain_saved_config(tmp_path / "cell.keras", results_root=tmp_path)
    assert cell.told and [r.code for r in cell.reasons] == ["no_fused_form"] and "RNN(MinimalCell)" in str(cell)
    (model,), answer = explain_saved_config(tmp_path / "subclassed.keras", results_root=tmp_path)
    assert not model.told and answer.unknown[0].class_name == "Subclassed"
    assert str(model).startswith("Subclassed layer 'Subclassed'") and "unknown class Subclassed" in str(model)


def test_explain_imports_no_framework(saved, tmp_path):
    """`lstmstudy explain` on a .keras file whose layer falls back (the cost read from claim 1's results) and on
    an .h5 file: neither torch, TensorFlow nor Keras is imported."""
    code = ("import json, sys\nfrom lstmstudy.cli import main\n"
            f"status = main(['explain', {str(saved[2])!r}, {str(saved[3])!r}, '--json'])\n"
            "print('LOADED' + json.dumps([m for m in ('torch', 'tensorflow', 'keras') if m in sys.modules]))\n"
            "sys.exit(status)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 1, done.stderr  # the Sequential's ReLU LSTM falls back
    assert done.stdout.strip().splitlines()[-1] == "LOADED[]"


def test_the_tables_agree_with_keras():
    """The mask passers are Keras's layers that support masking with its default `compute_mask`, and every Keras
    layer class is known as Keras's (an .h5 config names no module)."""
    from keras.src.utils.python_utils import is_default

    classes = {obj.__name__: obj for obj in vars(L).values() if isinstance(obj, type) and issubclass(obj, L.Layer)}
    assert set(classes) <= KERAS_LAYERS
    for name in sorted(MASK_PASSERS):
        cls = classes[name]
        assert is_default(cls.compute_mask), name
        owners = [c for c in cls.__mro__ if c.__module__.startswith("keras") and "supports_masking = True" in
                  inspect.getsource(c)]
        assert owners, name
