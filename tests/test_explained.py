"""The explainer's tables that pages 1 and 5 show are stored data (`lstmstudy.explained`): what the explainer
answers now (else they are stale, and the message names the command that writes them), read with torch,
TensorFlow, Keras and pynvml blocked, and a missing or corrupt file is one clear line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lstmstudy import cli, explained
from lstmstudy.errors import ResultsCorrupt, StudyError

ROOT = Path(__file__).resolve().parent.parent
#: the committed store, whatever $LSTMSTUDY_RESULTS says
COMMITTED = ROOT / "results"
CLEAN = {"lstmstudy": "0.1.0", "git_commit": "abc1234", "git_dirty": False, "keras": "3", "keras_backends": ["torch"],
         "tensorflow": "", "torch": "2"}


@pytest.fixture(scope="module", params=sorted(explained.COLUMNS))
def answered(request) -> tuple[str, pd.DataFrame, list[str]]:
    """A table as the explainer answers it now, once per test module (masks starts a process for Keras's other
    backend)."""
    frame, backends = explained.TABLES[request.param]()
    return request.param, frame, backends


def test_a_stored_table_is_what_the_explainer_answers_now(answered):
    table, frame, backends = answered
    path = explained.path(table, COMMITTED)
    stored = json.loads(path.read_text(encoding="utf-8"))["computed_with"]["keras_backends"]
    if stored != backends:
        pytest.skip(f"{path.name} was explained on Keras's {stored} backends, this process runs {backends}")
    assert tuple(frame.columns) == explained.COLUMNS[table]
    assert explained.load(table, COMMITTED).table.to_dict("records") == frame.to_dict("records"), \
        f"{path} is stale: run `{explained.WRITE}`, then re-render pages 1 and 5"


BLOCKED_LOAD = f"""
import json
from lstmstudy.houses import block_measuring, measuring_loaded

block_measuring()
from pathlib import Path
from lstmstudy import explained

loaded = {{t: explained.load(t, Path({str(COMMITTED)!r})) for t in explained.COLUMNS}}
print(json.dumps({{t: [e.table.to_dict("records"), e.provenance] for t, e in loaded.items()}}))
assert not measuring_loaded()
"""


def test_the_stored_tables_load_without_the_measuring_stack():
    done = subprocess.run([sys.executable, "-c", BLOCKED_LOAD], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for table, (rows, provenance) in json.loads(done.stdout).items():
        here = explained.load(table, COMMITTED)
        assert rows == here.table.to_dict("records") and provenance == here.provenance
        assert list(here.table.columns) == list(explained.COLUMNS[table]) and rows


def test_the_provenance_says_what_explained_the_rows():
    line = explained.provenance({**CLEAN, "git_dirty": True, "keras_backends": ["tensorflow", "torch"],
                                 "tensorflow": "2.21.0"})
    assert line == ("Explained by lstmstudy 0.1.0 (commit `abc1234`, with uncommitted changes) using Keras 3 on its "
                    "tensorflow and torch backends, TensorFlow 2.21.0 and PyTorch 2; `lstmstudy explain --tables` "
                    "explains them again.")
    assert "lstmstudy 0.1.0 (an unrecorded commit) using" in explained.provenance({**CLEAN, "git_commit": ""})
    three = explained.provenance({**CLEAN, "keras_backends": ["tensorflow", "torch", "jax"]})
    assert "on its tensorflow, torch and jax backends," in three
    assert "on its torch backend," in explained.provenance(CLEAN)


@pytest.mark.parametrize(("text", "error", "message"), [
    (None, StudyError, "is missing: `lstmstudy explain --tables` writes it"),
    ("{not json", ResultsCorrupt, ": not JSON (Expecting property name"),
    ('{"rows": [{"configuration": "x"}], "computed_with": {}}', ResultsCorrupt, ": not a stored masks table"),
    ('[1, 2]', ResultsCorrupt, ": not a stored masks table"),
])
def test_a_missing_or_corrupt_file_is_one_clear_line(tmp_path, text, error, message):
    path = explained.path("masks", tmp_path)
    if text is not None:
        path.parent.mkdir(parents=True)
        path.write_text(text, encoding="utf-8")
    with pytest.raises(error) as info:
        explained.load("masks", tmp_path)
    assert str(info.value).startswith(str(path)) and message in str(info.value) and "\n" not in str(info.value)
    assert "`lstmstudy explain --tables` writes it" in str(info.value)


def _frame(kernel: str = "cudnn", table: str = "triggers") -> pd.DataFrame:
    row = {"configuration": "nn.LSTM", "framework": "torch", "kernel": kernel, "fused": True,
           "why not the fused kernel": "-"}
    return pd.DataFrame([{column: row[column] for column in explained.COLUMNS[table]}])


def test_a_file_with_the_same_answers_at_a_clean_commit_is_kept(tmp_path):
    assert explained.store("triggers", _frame(), CLEAN, tmp_path)
    assert not explained.store("triggers", _frame(), {**CLEAN, "git_commit": "def5678"}, tmp_path)
    assert explained.load("triggers", tmp_path).provenance == explained.provenance(CLEAN)
    assert explained.store("triggers", _frame("onednn"), CLEAN, tmp_path)
    dirty = {**CLEAN, "git_dirty": True}
    assert not explained.store("triggers", _frame("onednn"), dirty, tmp_path), "the clean commit answers the same"
    assert explained.store("triggers", _frame("aten"), dirty, tmp_path)
    assert explained.store("triggers", _frame("aten"), dirty, tmp_path), "a dirty tree's record is replaced"
    assert explained.load("triggers", tmp_path).table.to_dict("records") == _frame("aten").to_dict("records")


def test_explain_tables_writes_the_store_and_nothing_when_a_row_failed(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(explained, "git_state", lambda: ("abc1234", False))
    monkeypatch.setattr(explained, "TABLES", {"triggers": lambda: (_frame(), ["torch"]),
                                                     "masks": lambda: (_frame(table="masks"), ["torch"])})
    args = ["explain", "--tables", "--results-dir", str(tmp_path)]
    assert cli.main(args) == 0 and cli.main(args) == 0
    paths = [explained.path(table, tmp_path) for table in ("triggers", "masks")]
    assert capsys.readouterr().out == "".join(f"wrote {path}\n" for path in paths) + \
        "".join(f"unchanged: {path}\n" for path in paths)
    assert explained.load("masks", tmp_path).table.to_dict("records") == _frame(table="masks").to_dict("records")
    monkeypatch.setitem(explained.TABLES, "masks", lambda: (_frame("?", "masks"), ["torch"]))
    assert cli.main(args) == 2 and "could not be explained here, nothing stored" in capsys.readouterr().err
    assert explained.load("masks", tmp_path).table.kernel.tolist() == ["cudnn"]


@pytest.mark.parametrize("args", [["explain"], ["explain", "model.keras", "--tables"]])
def test_explain_takes_a_model_or_tables(args, capsys):
    assert cli.main(args) == 2
    assert capsys.readouterr().err == "lstmstudy: error: give either saved models' PATHs or --tables\n"
