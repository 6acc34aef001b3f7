"""The book follows the registry of claims: each claim notebook has its page in the table of contents and its
row in the landing page's table, in claim order, and a missing one is named with the line to add."""

from __future__ import annotations

import re
from pathlib import Path

from registered import differences

from lstmstudy import toc
from lstmstudy.claims import registry
from lstmstudy.cli import SUMMARY_PAGES, claim_notebooks

ROOT = Path(__file__).resolve().parent.parent
#: a row of the landing page's table of claims: its number, what the source says, its page, what others published
INTRO_ROW = re.compile(r"\| (\d+) \| .* \| \{doc\}`claims/(\w+)` \| "
                       r"\{glue:text\}`conclusions\.ipynb::conclusions_published_(\d+):s` \|")


def test_every_claim_notebook_has_its_page_in_the_toc():
    pages = set(toc.toc_files())
    missing = [f"book/claims/{stem}" for stem in claim_notebooks() if f"book/claims/{stem}" not in pages]
    assert not missing, f"add these claim pages to _toc.yml: {missing}"


def test_every_claim_page_in_the_toc_has_its_notebook():
    stems = {f"book/claims/{stem}" for stem in claim_notebooks()}
    orphans = [name for name in toc.toc_files() if name.startswith("book/claims/") and name not in stems]
    assert not orphans, f"_toc.yml lists claim pages that no notebooks/NN_*.ipynb renders: {orphans}"


def test_the_claim_pages_are_the_registered_claims_in_order():
    claims = [Path(name).name for name in toc.toc_files() if name.startswith("book/claims/")]
    problem = differences(claims, [c.stem for c in registry(judged_only=True)], "_toc.yml")
    assert not problem, f"{problem} (a claim's entry under 'The claims': `- file: book/claims/<stem>`)"


def test_the_landing_page_lists_the_registered_claims_in_order():
    """Its words are prose, written by hand; its numbers, pages and published summaries follow the registry."""
    def row(number: str, stem: str, published: str) -> str:
        return (f"| {int(number)} | <what the source says> | {{doc}}`claims/{stem}` | "
                f"{{glue:text}}`conclusions.ipynb::conclusions_published_{published}:s` |")

    lines = [line for line in (ROOT / "book" / "intro.md").read_text().splitlines() if re.match(r"\| \d+ \|", line)]
    found = [row(f"{int(m[1]):02d}", m[2], m[3]) if (m := INTRO_ROW.fullmatch(line)) else line for line in lines]
    expected = [row(c.number, c.stem, c.number) for c in registry(judged_only=True)]
    problem = differences(found, expected, "the table of claims in book/intro.md")
    assert not problem, problem


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
