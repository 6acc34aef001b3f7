"""Every claim notebook runs under papermill with quick=True on this CPU, and fails early on bad parameters."""

from __future__ import annotations

from pathlib import Path

import nbformat
import papermill
import pytest

from lstmstudy import results
from lstmstudy.cli import claim_notebooks

NOTEBOOKS = claim_notebooks()


def test_there_are_claim_notebooks():
    assert NOTEBOOKS, "no notebooks/NN_*.ipynb found"


@pytest.mark.parametrize("stem", sorted(NOTEBOOKS))
def test_sources_are_stripped_and_parameterised(stem):
    nb = nbformat.read(NOTEBOOKS[stem], as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "strip outputs in notebooks/"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and "device" in tagged[0].source and "quick" in tagged[0].source
    assert "measure" in tagged[0].source and "results_dir" in tagged[0].source


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(NOTEBOOKS))
def test_quick_run_measures_and_renders(stem, tmp_path):
    out = tmp_path / f"{stem}.ipynb"
    papermill.execute_notebook(str(NOTEBOOKS[stem]), str(out), kernel_name="python3", progress_bar=False,
                               cwd=str(Path(__file__).resolve().parent.parent),
                               parameters={"device": "cpu", "measure": True, "quick": True,
                                           "results_dir": str(tmp_path / "results")})
    executed = nbformat.read(out, as_version=4)
    errors = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    stored = list((tmp_path / "results").glob("*/*.csv"))
    assert stored, "a quick measuring run stores a result set"
    for path in stored:
        assert results.read_rows(path)


@pytest.mark.parametrize("stem", sorted(NOTEBOOKS))
def test_a_bad_parameter_fails_first_and_stores_nothing(stem, tmp_path):
    with pytest.raises(papermill.PapermillExecutionError) as info:
        papermill.execute_notebook(str(NOTEBOOKS[stem]), str(tmp_path / "out.ipynb"), kernel_name="python3",
                                   progress_bar=False, parameters={"quick": "yes", "measure": True,
                                                                   "results_dir": str(tmp_path / "results")})
    assert info.value.ename == "ParameterError" and "'quick'" in info.value.evalue
    assert not (tmp_path / "results").exists()
