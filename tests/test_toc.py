"""The table of contents follows the claim notebooks: claim notebooks land over time, and each one
must have its page in the book, in claim order."""

from __future__ import annotations

from pathlib import Path

from lstmstudy import toc
from lstmstudy.claims import registry
from lstmstudy.cli import SUMMARY_PAGES, claim_notebooks

ROOT = Path(__file__).resolve().parent.parent


def test_every_claim_notebook_has_its_page_in_the_toc():
    pages = set(toc.toc_files())
    missing = [f"book/claims/{stem}" for stem in claim_notebooks() if f"book/claims/{stem}" not in pages]
    assert not missing, f"add these claim pages to _toc.yml: {missing}"


def test_every_claim_page_in_the_toc_has_its_notebook():
    stems = {f"book/claims/{stem}" for stem in claim_notebooks()}
    orphans = [name for name in toc.toc_files() if name.startswith("book/claims/") and name not in stems]
    assert not orphans, f"_toc.yml lists claim pages that no notebooks/NN_*.ipynb renders: {orphans}"


def test_the_claim_pages_are_the_registered_claims_in_order():
    claims = [name for name in toc.toc_files() if name.startswith("book/claims/")]
    assert [Path(name).name for name in claims] == [c.stem for c in registry(judged_only=True)]


def test_every_claim_notebook_is_a_registered_claim():
    assert list(claim_notebooks()) == [c.stem for c in registry(judged_only=True)]


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
