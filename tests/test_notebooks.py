"""Every claim notebook renders the rows `lstmstudy measure` stored, measures when asked, takes its grid from
the claim contract, and fails early on bad parameters."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from registered import differences

from lstmstudy import cli, results
from lstmstudy.claims import registry
from lstmstudy.cli import claim_notebooks
from lstmstudy.errors import StudyError

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = claim_notebooks()
#: the parameters every claim notebook has; the grid itself comes from the claim contract
COMMON = {"device": "auto", "measure": False, "quick": False, "grid": {}, "results_dir": ""}
#: parameters a page uses for its analysis only (they change no measurement)
ANALYSIS = {"02_cpu_vs_gpu_batch": {"dataset_size"}}


def parameters(stem: str) -> dict[str, object]:
    """The parameters cell of a notebook, as name -> default value."""
    import nbformat

    nb = nbformat.read(NOTEBOOKS[stem], as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{stem}: one cell tagged 'parameters'"
    return {node.target.id: ast.literal_eval(node.value) for node in ast.parse(tagged[0].source).body
            if isinstance(node, ast.AnnAssign)}


def execute(stem: str, out: Path, **parameters) -> None:
    """Execute a claim page as `lstmstudy reproduce` does: without `measure`, with the measuring stack blocked."""
    cli.execute(NOTEBOOKS[stem], out, parameters, measuring=bool(parameters.get("measure")))


def errors(path: Path) -> list:
    import nbformat

    executed = nbformat.read(path, as_version=4)
    return [o for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]


def test_every_judged_claim_has_its_notebook():
    problem = differences(list(NOTEBOOKS), [c.stem for c in registry(judged_only=True)], "notebooks/")
    assert not problem, f"{problem} (a claim's notebook is notebooks/<stem>.ipynb: copy another claim's)"


@pytest.mark.parametrize("claim", registry(judged_only=True), ids=lambda c: c.stem)
def test_the_notebook_takes_its_grid_from_the_contract(claim):
    found = parameters(claim.stem)
    assert set(found) == set(COMMON) | {"min_time"} | ANALYSIS.get(claim.stem, set())
    assert {k: found[k] for k in COMMON} == COMMON
    assert found["min_time"] == claim.min_time
    grid_names = set(claim.defaults["cpu"]) | set(claim.defaults["cuda"])
    assert not grid_names & set(found), "a grid parameter belongs to the contract's defaults, not the notebook"


@pytest.mark.parametrize("stem", sorted(NOTEBOOKS))
def test_sources_are_stripped(stem):
    import nbformat

    nb = nbformat.read(NOTEBOOKS[stem], as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "strip outputs in notebooks/"
    assert any("claim.CLAIM.run(" in c.source for c in nb.cells if c.cell_type == "code"), "measure via the contract"


@pytest.mark.parametrize("stem", sorted(NOTEBOOKS))
def test_the_first_cell_installs_the_package_only_where_it_is_missing(stem):
    """A page opened in a hosted notebook (its launch button) installs lstmstudy, from the wheel uploaded beside it
    (it is on no index), with extras the package declares; where lstmstudy is installed, as where the study renders
    it, the cell does nothing. tests/test_wheel.py runs the cell with a real wheel."""
    import nbformat
    from importlib import metadata

    first = next(c for c in nbformat.read(NOTEBOOKS[stem], as_version=4).cells if c.cell_type == "code")
    pattern = (r'try:\n    import lstmstudy\nexcept ImportError:\n(?:    .*\n|\n)*'
               r'    %pip install .*"\{wheel\}\[([a-z,]+)\]"$')
    install = re.search(pattern, first.source)
    assert install, f"{stem}: the first code cell installs lstmstudy where it cannot be imported"
    declared = {extra for line in metadata.requires("lstmstudy") or []
                for extra in re.findall(r'extra == "(\w+)"', line)}
    assert set(install.group(1).split(",")) <= declared


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(NOTEBOOKS))
def test_the_page_renders_what_measure_stored(stem, quick_measurement, tmp_path):
    assert quick_measurement.done.returncode == 0, quick_measurement.done.stderr[-2000:]
    out = tmp_path / f"{stem}.ipynb"
    execute(stem, out, device="cpu", results_dir=str(quick_measurement.root))
    assert not errors(out)


@pytest.mark.slow
def test_a_notebook_measures_when_asked_with_grid_overrides(tmp_path):
    out = tmp_path / "01.ipynb"
    execute("01_cudnn_fallback", out, device="cpu", measure=True, quick=True, results_dir=str(tmp_path / "results"),
            grid={"phases": ["inference"], "blog_model": False})
    assert not errors(out)
    stored = results.load("cudnn_fallback", tmp_path / "results")
    assert not stored.empty and set(stored.phase) == {"inference"} and "keras.blog_model" not in set(stored.kernel)


@pytest.mark.parametrize(("stem", "parameters", "message"), [
    ("01_cudnn_fallback", {"quick": "yes"}, "'quick'"),
    ("03_mixed_precision", {"grid": {"hiddenz": [8]}}, "no grid parameter 'hiddenz'"),
    ("05_bucketing", {"grid": {"static_pad_to": "nowhere"}}, "'static_pad_to'"),
])
def test_a_bad_parameter_fails_first_and_stores_nothing(stem, parameters, message, tmp_path):
    with pytest.raises(StudyError, match=f"ParameterError: .*{re.escape(message)}"):
        execute(stem, tmp_path / "out.ipynb", measure=True, results_dir=str(tmp_path / "results"), **parameters)
    assert not (tmp_path / "results").exists()
