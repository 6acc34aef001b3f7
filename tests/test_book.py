"""The book build is a test: it builds from the committed pages with warnings treated as errors, and
fails on a missing page, a broken cross-reference or link, or a figure that did not make it in.

Chromium's view of the same build is checked in test_browser.py.
"""

from __future__ import annotations

import pytest
from htmlpages import (
    Page,
    fragment,
    image_outputs,
    local_url,
    pages,
    source_of,
    url_to_file,
)

from lstmstudy import toc
from lstmstudy.claims import registry

pytestmark = pytest.mark.slow
ORIGIN = "http://book.invalid/"


def test_book_builds_without_warnings(built_book):
    built_book.check()
    assert (built_book.html / "index.html").exists()


def test_every_page_of_the_toc_is_built(built_book):
    built_book.check()
    missing = [name for name in toc.toc_files() if not (built_book.html / f"{name}.html").exists()]
    assert not missing, f"pages in _toc.yml that were not built: {missing}"


def test_every_figure_made_it_into_its_page(built_book):
    built_book.check()
    problems = []
    for name in toc.toc_files():
        html = built_book.html / f"{name}.html"
        page = Page.parse(html.read_text())
        shown = [src for src in page.images if "_images/" in src]
        wanted = image_outputs(source_of(html.relative_to(built_book.html)))
        if len(shown) < wanted:
            problems.append(f"{name}: {wanted} figures in the notebook, {len(shown)} in the page")
        problems += [f"{name}: image {src} is not in the build" for src in page.images
                     if not src.startswith("data:") and not (html.parent / src.split("#")[0]).resolve().is_file()]
    assert not problems, "\n".join(problems)


def test_every_local_link_and_anchor_resolves(built_book):
    built_book.check()
    ids: dict[str, set[str]] = {}
    problems = []
    for relative in pages(built_book.html):
        page_url = ORIGIN + relative.as_posix()
        for href in Page.parse((built_book.html / relative).read_text()).links:
            url = local_url(page_url, href)
            if url is None:
                continue
            target = url_to_file(url, ORIGIN, built_book.html)
            if not target.is_file():
                problems.append(f"{relative}: link {href!r} points at a missing file")
            elif (anchor := fragment(href)) and target.suffix == ".html":
                if target not in ids:
                    ids[target] = Page.parse(target.read_text()).ids
                if anchor not in ids[target]:
                    problems.append(f"{relative}: link {href!r} points at a missing anchor")
    assert not problems, "\n".join(problems)


def test_the_ledger_links_every_claim_page(built_book):
    built_book.check()
    links = {href.split("#")[0] for href in Page.parse((built_book.html / "book" / "ledger.html").read_text()).links}
    claims = {name for name in toc.toc_files() if name.startswith("book/claims/")}
    numbers = {c.number for c in registry(judged_only=True)}
    registered = {page for number, page in toc.claim_pages().items() if number in numbers}
    assert len(registered) == len(numbers)
    assert registered <= claims
    assert {f"claims/{page.rsplit('/', 1)[1]}.html" for page in registered} <= links


def test_the_landing_page_names_the_result_sets_the_conclusions_rest_on(built_book, ledger_table):
    from lstmstudy import ledger

    built_book.check()
    sources = ledger.data_sources(ledger_table)
    for page in ("book/intro.html", "book/conclusions.html"):
        text = " ".join(Page.parse((built_book.html / page).read_text()).visible_text.split())
        assert sources in text, page


def test_code_lines_wrap_instead_of_being_cut_off(built_book):
    built_book.check()
    page = (built_book.html / "book" / "claims" / "01_cudnn_fallback.html").read_text()
    assert "_static/lstmstudy.css" in page
    assert "pre-wrap" in (built_book.html / "_static" / "lstmstudy.css").read_text()


def test_the_landing_page_shows_the_verdicts_in_a_figure_and_a_table(built_book, ledger_table):
    """The one-minute answer: the landing figure (an image glued from the conclusions) and, per claim, what was
    found on this study's GPUs and CPUs and by others, as the ledger computes it."""
    import html
    import re

    from lstmstudy import ledger

    built_book.check()
    page = (built_book.html / "book" / "intro.html").read_text()
    text = "".join(Page.parse(page).visible_text.split())  # the parser spaces out inline tags: compare unspaced
    for number in sorted(set(ledger_table["claim"])):
        for key, cell in ledger.landing_cells(ledger_table, number).items():
            assert "".join(html.unescape(re.sub(r"<[^>]+>", "", cell)).split()) in text, (number, key)
    assert re.search(r"<img [^>]*src=\"[^\"]+\.png\"", page), "the landing figure is missing"
