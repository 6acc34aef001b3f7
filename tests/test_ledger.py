"""The claims ledger and the conclusions are computed from the claim modules' verdicts, never typed."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import nbformat
import papermill
import pytest

from lstmstudy import ledger
from lstmstudy.cli import SUMMARY_PAGES
from lstmstudy.claims import Outcome

ROOT = Path(__file__).resolve().parent.parent

FAKE_CLAIM = '''
from lstmstudy.claims import Outcome, Verdict

NAME = "{name}"
NUMBER = "{number}"
STATEMENT = "A statement with *stars*, a | pipe and `ticks`"
SEED_FIGURE = "2-5x"
RULE = "reproduced at 2x or more"
VERDICTS = {verdicts!r}


def verdicts(frame):
    return [Verdict(NAME, STATEMENT, hw, SEED_FIGURE, ours, f"{{ours:.2f}}x", Outcome(outcome), RULE)
            for hw, ours, outcome in VERDICTS]
'''


@pytest.fixture
def fake_claims(tmp_path, monkeypatch, results_root):
    """A registry of fake claim modules (on sys.path) and a table of contents with their pages."""
    def write(number: str, verdicts: list[tuple[str, float, str]]) -> str:
        name = f"fake_claim_{number}"
        (tmp_path / f"{name}.py").write_text(FAKE_CLAIM.format(name=name, number=number, verdicts=verdicts))
        return name

    monkeypatch.syspath_prepend(str(tmp_path))
    forget_fakes()
    registry = {
        "01": write("01", [("cpu-a", 2.5, "reproduced"), ("cuda-b", 1.5, "partly")]),
        "02": write("02", []),
        "03": "fake_claim_not_written_yet",
    }
    toc = tmp_path / "_toc.yml"
    toc.write_text(textwrap.dedent("""\
        format: jb-book
        root: book/intro
        parts:
          - chapters:
              - file: book/claims/01_first
              - file: book/claims/02_second.ipynb
              - file: book/ledger
        """))
    yield registry, toc
    forget_fakes()


def forget_fakes() -> None:
    """Drop imported fake claim modules, so each test imports its own files."""
    for name in [n for n in sys.modules if n.startswith("fake_claim_")]:
        del sys.modules[name]
    importlib.invalidate_caches()


def test_the_registry_lists_claims_01_to_06_and_the_written_modules_agree():
    assert list(ledger.CLAIMS) == [f"0{i}" for i in range(1, 7)]
    for number, module in ledger.modules().items():
        assert module.NUMBER == number
        for attribute in ("NAME", "STATEMENT", "SEED_FIGURE", "RULE", "verdicts"):
            assert hasattr(module, attribute), f"{module.__name__} has no {attribute}"
    assert set(ledger.modules()) | set(ledger.missing()) == set(ledger.CLAIMS)


def test_a_module_not_written_yet_is_skipped_and_named(fake_claims):
    registry, _ = fake_claims
    assert list(ledger.modules(registry)) == ["01", "02"]
    assert ledger.missing(registry) == ["03"]


def test_a_broken_module_is_an_error_not_skipped(tmp_path, monkeypatch):
    (tmp_path / "broken_claim.py").write_text("raise RuntimeError('half-written')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RuntimeError, match="half-written"):
        ledger.modules({"01": "broken_claim"})


def test_a_module_registered_under_the_wrong_number_is_an_error(fake_claims):
    registry, _ = fake_claims
    with pytest.raises(ValueError, match="registered as claim '05'"):
        ledger.modules({"05": registry["01"]})


def test_the_table_has_one_row_per_claim_and_hardware_set(fake_claims, results_root):
    registry, toc = fake_claims
    table = ledger.table(results_root, registry=registry, toc=toc)
    assert list(table.columns) == ledger.COLUMNS
    assert table[["claim", "hardware", "verdict"]].values.tolist() == [
        ["01", "cpu-a", "reproduced"], ["01", "cuda-b", "partly"], ["02", "", Outcome.NOT_MEASURED.value]]
    assert table.page.tolist() == ["book/claims/01_first", "book/claims/01_first", "book/claims/02_second"]
    assert table["our figure"].tolist() == ["2.50x", "1.50x", "no stored result set"]


def test_the_markdown_links_pages_cites_sources_and_escapes_text(fake_claims, results_root):
    registry, toc = fake_claims
    text = ledger.to_markdown(ledger.table(results_root, registry=registry, toc=toc))
    assert "{doc}`Claim 1 </book/claims/01_first>`" in text
    assert "{cite:p}`blogpost-lstm-gpu,chollet-dlwp2,so-cudnnlstm`" in text
    assert r"\*stars\*, a \| pipe and \`ticks\`" in text
    assert all(line.count(" | ") == 4 for line in text.splitlines())  # five cells in every row


def test_the_conclusions_follow_the_verdicts(fake_claims, results_root, tmp_path):
    registry, toc = fake_claims
    table = ledger.table(results_root, registry=registry, toc=toc)
    text = ledger.conclusions(table, pending=["03"])
    assert "3 verdicts on 2 claims" in text and "1 reproduced, 1 partly reproduced" in text
    assert "**reproduced** on `cpu-a` (2.50x), and **partly reproduced** on `cuda-b` (1.50x)" in text
    assert "neither confirmed nor refuted" in text and "Claim 03 has no verdict yet" in text
    assert "No GPU result set is stored" not in text
    # the same claims with other figures say something else: nothing is hard-coded
    (tmp_path / "fake_claim_01.py").write_text(FAKE_CLAIM.format(
        name="fake_claim_01", number="01", verdicts=[("cpu-a", 2.5, "reproduced"), ("cpu-c", 1.0, "not reproduced")]))
    forget_fakes()
    text = ledger.conclusions(ledger.table(results_root, registry=registry, toc=toc), pending=[])
    assert "**not reproduced** on `cpu-c`" in text and "No GPU result set is stored" in text
    assert "Its GPU form is untested" in text
    assert ledger.counts(ledger.table(results_root, registry=registry, toc=toc)) == {
        "claims": 2, "verdicts": 3, "reproduced": 1, "partly": 0, "not_reproduced": 1, "not_measured": 1,
        "gpu_sets": 0, "cpu_sets": 2}


def test_claim_pages_come_from_the_toc(fake_claims):
    _, toc = fake_claims
    assert ledger.claim_pages(toc) == {"01": "book/claims/01_first", "02": "book/claims/02_second"}
    assert ledger.toc_files(toc) == ["book/intro", "book/claims/01_first", "book/claims/02_second", "book/ledger"]


@pytest.mark.parametrize("name", SUMMARY_PAGES)
def test_summary_sources_are_stripped_and_parameterised(name):
    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "strip outputs in notebooks/"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and "results_dir" in tagged[0].source


@pytest.mark.slow
@pytest.mark.parametrize("name", SUMMARY_PAGES)
def test_summary_pages_render_from_an_empty_store(name, tmp_path):
    out = tmp_path / f"{name}.ipynb"
    papermill.execute_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"), str(out), kernel_name="python3",
                               progress_bar=False, cwd=str(ROOT), parameters={"results_dir": str(tmp_path / "results")})
    executed = nbformat.read(out, as_version=4)
    markdown = [o["data"]["text/markdown"] for c in executed.cells if c.cell_type == "code"
                for o in c.outputs if "text/markdown" in o.get("data", {})]
    assert markdown and "not measured" in " ".join(markdown)
