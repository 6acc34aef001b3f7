"""The rendered pages say what the current code computes from the committed results: a page whose glued
verdicts, ledger or conclusions differ is stale (re-render with `lstmstudy reproduce --no-measure`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lstmstudy import ledger, notebook, published_rules, results
from lstmstudy.claims import registry

ROOT = Path(__file__).resolve().parent.parent
MARKDOWN = "application/papermill.record/text/markdown"
STALE = "is stale: re-render it with `lstmstudy reproduce --no-measure`"


def read(page: Path):
    import nbformat  # not at the top: a GPU node collects these tests without the notebook stack

    return nbformat.read(page, as_version=4)


def glued(page: Path) -> dict[str, object]:
    """Every value a page glued, by key: Markdown as its text, anything else as a Python value."""
    out = {}
    for cell in read(page).cells:
        for output in cell.get("outputs", []):
            if name := output.get("metadata", {}).get("scrapbook", {}).get("name"):
                data = output["data"]
                out[name] = data.get(MARKDOWN) or ast.literal_eval(data["application/papermill.record/text/plain"])
    return out


def markdown(page: Path) -> list[str]:
    return [o["data"]["text/markdown"] for c in read(page).cells if c.cell_type == "code"
            for o in c.get("outputs", []) if "text/markdown" in o.get("data", {})]


@pytest.mark.parametrize("claim", registry(judged_only=True), ids=lambda c: c.stem)
def test_a_claim_page_glues_the_verdicts_the_code_computes_now(claim):
    page = ROOT / "book" / "claims" / f"{claim.stem}.ipynb"
    data = results.load(claim.name)
    verdicts = claim.judge(data)
    expected = notebook.verdict_glue(f"c{claim.number}", [v for v in verdicts if v.rule == claim.rule])
    expected[f"c{claim.number}_glance"] = notebook.glance(claim, data, verdicts)
    expected.update(notebook.rule_glue(claim, verdicts))  # the rule the page states is the code's, with its history
    found = glued(page)
    assert {k: found.get(k) for k in expected} == expected, f"{page.name} {STALE}"


@pytest.mark.parametrize("claim", [c for c in registry(judged_only=True) if published_rules.verdicts(c.number)],
                         ids=lambda c: c.stem)
def test_a_claim_page_glues_the_published_rows_the_code_computes_now(claim):
    page = ROOT / "book" / "claims" / f"{claim.stem}.ipynb"
    expected = notebook.published_glue(claim.number)
    found = glued(page)
    assert {k: found.get(k) for k in expected} == expected, f"{page.name} {STALE}"


@pytest.mark.parametrize(("page", "render"), [("ledger", ledger.to_markdown), ("conclusions", ledger.conclusions)])
def test_the_ledger_and_the_conclusions_are_current(page, render, ledger_table):
    assert render(ledger_table) in markdown(ROOT / "book" / f"{page}.ipynb"), f"book/{page}.ipynb {STALE}"


@pytest.mark.parametrize("page", sorted((ROOT / "book").rglob("*.ipynb")), ids=lambda p: p.stem)
def test_the_parameter_cells_of_a_page_are_folded(page):
    cells = [c for c in read(page).cells
             if {"parameters", "injected-parameters"} & set(c.metadata.get("tags", []))]
    assert cells and all("hide-cell" in c.metadata["tags"] for c in cells), f"{page.name} {STALE}"
