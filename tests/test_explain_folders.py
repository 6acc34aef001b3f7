"""`lstmstudy explain` on folders as users keep them and in a CI job: weights files and other files skipped with one
note, a folder without a model said in one line, Keras 2's cuDNN layers named as such, one JSON shape for any
number of files, a closed pipe ended quietly with the status the answer earned, and the hook's file pattern.
Models are written as Keras writes their configs, so no framework is imported."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from lstmstudy import cli

ROOT = Path(__file__).resolve().parent.parent
KERAS = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"} | {"KERAS_BACKEND": "tensorflow"}


def _keras_file(path: Path, *layers: dict) -> Path:
    """A .keras file holding a Sequential model of `layers` (each as `_layer` writes it)."""
    config = {"module": "keras", "class_name": "Sequential",
              "config": {"name": path.stem, "layers": [_layer("InputLayer", batch_shape=[None, 5, 3]), *layers]}}
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", json.dumps(config))
    return path


def _layer(cls: str, **config) -> dict:
    return {"module": "keras.layers", "class_name": cls, "config": {"name": cls.lower(), **config}}


def _h5(path: Path, model_config: dict | None) -> Path:
    """An .h5 file as Keras 2 saved one: weights, and the model's config where it saved the model."""
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "w") as h5:
        h5.create_dataset("model_weights/lstm/kernel", data=[[0.0]])
        if model_config is not None:
            h5.attrs["model_config"] = json.dumps(model_config)
            h5.attrs["keras_version"] = "2.3.1"
            h5.attrs["backend"] = "tensorflow"
    return path


def _explain(capfd, *args: str) -> subprocess.CompletedProcess:
    capfd.readouterr()
    code = cli.main(["explain", *args])
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(args, code, out, err)


@pytest.fixture
def kept(tmp_path) -> Path:
    """A folder as users keep one: a model, its weights saved apart, notes, and a hidden folder."""
    folder = tmp_path / "models"
    (folder / "old").mkdir(parents=True)
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("[core]\n")
    _keras_file(folder / "fast.keras", _layer("LSTM", units=4))
    _h5(folder / "fast.weights.h5", None)
    (folder / "old" / "fast.weights.json").write_text("{}")
    _h5(folder / "old" / "weights_only.h5", None)  # Keras 2's save_weights named it like a model
    keras2 = [{"class_name": "LSTM", "config": {"name": "lstm_1", "units": 4, "activation": "relu"}}]
    _h5(folder / "old" / "best.hdf5", {"class_name": "Sequential", "config": {"name": "s", "layers": keras2}})
    (folder / "README.md").write_text("# models\n")
    return folder


def test_weights_and_other_files_are_skipped_with_one_note(kept, capfd):
    done = _explain(capfd, str(kept))
    assert done.returncode == 1 and "fast.keras: 1 recurrent layer(s)" in done.stdout
    assert "best.hdf5: 1 recurrent layer(s)" in done.stdout  # Keras 2's ModelCheckpoint(...hdf5): a model, read
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("note: skipped ")
    for name in ("fast.weights.h5", "fast.weights.json", "weights_only.h5"):
        assert name in done.stderr
    assert "1 other file(s) that are not saved models" in done.stderr and ".git" not in done.stderr
    answer = json.loads(_explain(capfd, str(kept), "--json").stdout)
    weights = "weights only, no model"
    assert {Path(s["path"]).name: s["why"].split(":")[0] for s in answer["skipped"]} == {
        "fast.weights.h5": weights, "fast.weights.json": weights, "weights_only.h5": "weights only",
        "README.md": "not a saved .keras, .h5 or .hdf5 model"}


def test_a_weights_file_given_by_name_is_skipped_not_refused(kept, capfd):
    for name in ("fast.weights.h5", "old/weights_only.h5"):
        done = _explain(capfd, str(kept / name))
        assert (done.returncode, done.stdout) == (0, "") and done.stderr.startswith("note: skipped "), done.stderr


def test_a_folder_with_no_model_says_so_in_one_line(tmp_path, capfd):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no model here\n")
    done = _explain(capfd, str(tmp_path / "empty"))
    assert (done.returncode, done.stdout) == (0, "") and done.stderr.count("\n") == 1
    assert "holding no saved Keras model (.keras, .h5 or .hdf5)" in done.stderr and "is not a file" not in done.stderr


def test_keras_2_cudnn_layers_are_named_as_such(tmp_path, capfd):
    layers = [{"class_name": "CuDNNLSTM", "config": {"name": "cu_dnnlstm_1", "trainable": True, "dtype": "float32",
                                                     "batch_input_shape": [None, 5, 3], "units": 4,
                                                     "return_sequences": True}},
              {"class_name": "CuDNNGRU", "config": {"name": "cu_dnngru_1", "trainable": True, "units": 2}},
              {"class_name": "Dense", "config": {"name": "dense_1", "trainable": True, "units": 1}}]
    path = _h5(tmp_path / "keras2.h5", {"class_name": "Sequential", "config": {"name": "s", "layers": layers}})
    done = _explain(capfd, str(path), "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)["models"][0]["layers"]
    assert [(f["layer"], f["layer_type"], f["kernel"], f["fused"]) for f in found] == [
        ("cu_dnnlstm_1", "CuDNNLSTM", "cudnn", True), ("cu_dnngru_1", "CuDNNGRU", "cudnn", True)]
    assert "no fallback" in found[0]["notes"][0]["message"] and "keras.layers.LSTM" in found[0]["notes"][0]["message"]


def test_the_note_says_where_a_converted_keras_2_layer_keeps_cudnn(tmp_path):
    """The Keras 2 layer is cuDNN's on any backend; the keras.layers.GRU a converted model holds is not on jax, which
    has no cuDNN GRU, and the note says so whichever backend the answer is for."""
    from lstmstudy.saved_config import explain_saved_config

    gru = {"class_name": "CuDNNGRU", "config": {"name": "gru", "trainable": True, "units": 2}}
    layers = [{"class_name": "CuDNNLSTM", "config": {"name": "lstm", "trainable": True, "units": 4,
                                                     "return_sequences": True}},
              {"class_name": "Bidirectional", "config": {"name": "both", "trainable": True, "layer": gru}}]
    path = _h5(tmp_path / "keras2.h5", {"class_name": "Sequential", "config": {"name": "s", "layers": layers}})
    for backend in ("tensorflow", "torch", "jax"):
        findings = explain_saved_config(path, backend=backend, results_root=tmp_path)[0]
        assert [(f.layer, f.kernel, f.fused) for f in findings] == [
            ("lstm", "cudnn", True), ("both/gru", "cudnn", True), ("both/backward_gru", "cudnn", True)], backend
        assert "keras.layers.LSTM, whose defaults (tanh, sigmoid, a bias) keep cuDNN" in findings[0].notes[0].message
        assert ("keep cuDNN's fused kernel on tensorflow and torch; on jax it would run Keras's generic kernel"
                in findings[1].notes[0].message), findings[1].notes[0].message


def test_a_missing_weights_file_is_refused_not_skipped(tmp_path, capfd):
    """A typo in a CI step's path fails it, whatever its name says the file would hold."""
    done = _explain(capfd, str(tmp_path / "gone.weights.h5"))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"lstmstudy: error: no such file: {tmp_path / 'gone.weights.h5'}\n"


def test_json_has_one_shape_for_any_number_of_files(kept, tmp_path, capfd):
    relu = _keras_file(tmp_path / "relu.keras", _layer("LSTM", units=4, activation="relu"))
    one = json.loads(_explain(capfd, str(relu), "--json").stdout)
    many = _explain(capfd, str(relu), str(kept), "--json")
    both = json.loads(many.stdout)
    assert set(one) == set(both) == {"explained_for", "keras_backend", "exit_status", "models", "skipped"}
    assert (one["exit_status"], both["exit_status"], many.returncode) == (1, 1, 1)
    assert [Path(m["model"]).name for m in both["models"]] == ["relu.keras", "fast.keras", "best.hdf5"]
    assert "--json prints one object" in cli.EXPLAIN_HELP


def test_a_closed_pipe_ends_quietly_with_the_status_the_answer_earned(kept, tmp_path):
    """The reader (`| head`) has gone before anything is printed: no traceback, and the gate's status stands."""
    models = [_keras_file(tmp_path / f"m{i:02d}.keras", _layer("LSTM", units=4, activation="relu")) for i in range(3)]
    for extra in ([], ["--json"]):
        child = subprocess.Popen([sys.executable, "-m", "lstmstudy", "explain", *map(str, models), *extra],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=KERAS, cwd=ROOT)
        child.stdout.close()  # as `head` does once it has what it wants
        stderr = child.stderr.read().decode()
        assert child.wait(timeout=120) == 1 and stderr == "", stderr


def test_the_hook_leaves_weights_files_out():
    found = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))[0]
    files, exclude = re.compile(found["files"]), re.compile(found.get("exclude", "$^"))

    def picked(name: str) -> bool:  # pre-commit's own rule: `files` matches and `exclude` does not
        return bool(files.search(name)) and not exclude.search(name)

    assert all(picked(name) for name in ("model.keras", "models/old.h5", "a/weights_model.h5",
                                             "checkpoints/best.hdf5"))
    assert not any(picked(name) for name in ("m.weights.h5", "a/b.weights.h5", "m.weights.json", "m.keras.bak"))


def test_plan_only_plans_the_quick_grids_with_quick(capsys):
    def planned_points(*quick: str) -> int:
        assert cli.main(["measure", "--plan-only", "--device", "cuda", "--claims", "01", *quick]) == 0
        return sum(int(n) for n in re.findall(r"(\d+) points", capsys.readouterr().out))

    full, quick = planned_points(), planned_points("--quick")
    assert 0 < quick < full
