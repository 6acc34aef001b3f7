"""The book follows the registry of claims: each claim notebook has its page in the table of contents (which takes
book/claims/ whole) and its row in the landing page's table (written from the registry), in claim order."""

from __future__ import annotations

from pathlib import Path

from registered import differences

from lstmstudy import ledger, rules, toc
from lstmstudy.claims import registry
from lstmstudy.cli import SUMMARY_PAGES, claim_notebooks

ROOT = Path(__file__).resolve().parent.parent


def test_every_claim_notebook_has_its_page_in_the_toc():
    pages = set(toc.toc_files())
    missing = [f"book/claims/{stem}" for stem in claim_notebooks() if f"book/claims/{stem}" not in pages]
    assert not missing, f"these claim pages are not in the book: {missing}; `lstmstudy reproduce` renders them"


def test_every_claim_page_in_the_toc_has_its_notebook():
    stems = {f"book/claims/{stem}" for stem in claim_notebooks()}
    orphans = [name for name in toc.toc_files() if name.startswith("book/claims/") and name not in stems]
    assert not orphans, f"book/claims/ holds pages that no notebooks/NN_*.ipynb renders: {orphans}"


def test_the_claim_pages_are_the_registered_claims_in_order():
    claims = [Path(name).name for name in toc.toc_files() if name.startswith("book/claims/")]
    problem = differences(claims, [c.stem for c in registry(judged_only=True)], "_toc.yml")
    assert not problem, f"{problem} (the pages `lstmstudy reproduce` renders into book/claims/, which _toc.yml takes)"


def test_the_landing_page_lists_the_registered_claims_in_order():
    """Its table of claims is written from the registry by `lstmstudy reproduce`, and it is current."""
    assert "```{include} claims_table.md\n```" in (ROOT / "book" / "intro.md").read_text()
    written = (ROOT / "book" / toc.CLAIMS_TABLE).read_text()
    assert written == ledger.claims_table(), "book/claims_table.md is stale: run `lstmstudy reproduce --no-measure`"

    rows = [line.split(" | ")[0] for line in written.splitlines() if line.startswith("| {doc}")]
    assert rows == [f"| {{doc}}`{int(c.number)} <claims/{c.stem}>`" for c in registry(judged_only=True)]
    assert all(c.says for c in registry(judged_only=True)), "each claim says what its sources say (`Claim.says`)"


def test_the_landing_page_includes_the_glossary_the_code_defines_and_every_outcome_has_a_meaning():
    assert "```{include} outcome_words.md\n```" in (ROOT / "book" / "intro.md").read_text()
    written = (ROOT / "book" / toc.GLOSSARY).read_text()
    assert written == rules.glossary(), "book/outcome_words.md is stale: run `lstmstudy reproduce --no-measure`"
    assert all(f"- **{outcome.value}**: " in written for outcome in rules.Outcome)


def test_the_ledger_and_the_conclusions_are_in_the_toc_and_have_sources():
    pages = toc.toc_files()
    for name in SUMMARY_PAGES:
        assert f"book/{name}" in pages
        assert (ROOT / "notebooks" / f"{name}.ipynb").exists()


def test_every_toc_page_exists():
    """An executed page is missing until `lstmstudy reproduce` has rendered it."""
    missing = [name for name in toc.toc_files()
               if not any((ROOT / f"{name}{suffix}").exists() for suffix in (".md", ".ipynb"))]
    assert not missing, (f"pages listed in _toc.yml do not exist: {missing}; the claim pages, the ledger and the "
                         f"conclusions are rendered by `lstmstudy reproduce` (see book/reproduce.md)")


def test_the_landing_page_opens_with_the_answer_the_conclusions_glued_and_its_figures_caption():
    """The answer and the caption are the conclusions page's glue, written out by `lstmstudy reproduce` because
    myst-nb pastes Markdown only within the page that glued it; both are current with that page."""
    from lstmstudy.cli import LANDING_HEADER, glued_markdown

    intro = (ROOT / "book" / "intro.md").read_text()
    assert intro.index("```{include} landing_answer.md\n```") < intro.index("```{glue} landing_figure")
    assert intro.index("```{include} landing_caption.md\n```") < intro.index("```{glue} landing_figure")
    assert intro.index("```{include} claims_table.md") < intro.index("conclusions_data_sources")  # ids last
    glued = glued_markdown(ROOT / "book" / "conclusions.ipynb", toc.LANDING_TEXTS)
    assert set(glued) == set(toc.LANDING_TEXTS)
    for key, name in toc.LANDING_TEXTS.items():
        written = (ROOT / "book" / name).read_text()
        assert written == LANDING_HEADER + glued[key] + "\n", f"book/{name} is stale: run `lstmstudy reproduce`"
    assert glued["landing_answer"].startswith("**If your LSTM got slower on a GPU")
