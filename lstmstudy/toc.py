"""The book's table of contents (`_toc.yml`) read as a list of pages: YAML only, so that rendering the
book (`lstmstudy book`) needs none of the measuring stack."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import yaml

from lstmstudy.paths import study_root

#: the claim notebooks in notebooks/ (`01_cudnn_fallback.ipynb`): each renders into book/claims/
CLAIM_NOTEBOOKS = "[0-9][0-9]_*.ipynb"
#: the landing page's table of claims in book/: `lstmstudy reproduce` writes it (`ledger.claims_table`),
#: book/intro.md includes it
CLAIMS_TABLE = "claims_table.md"
#: the glossary of outcome words in book/: `lstmstudy reproduce` writes it (`rules.glossary`), book/intro.md includes it
GLOSSARY = "outcome_words.md"
#: the landing page's answer and its figure's caption in book/: `lstmstudy reproduce` writes each from what the
#: conclusions page glued under the same name (`ledger.answer`, `ledger.chart_caption`), book/intro.md includes them
LANDING_TEXTS = {"landing_answer": "landing_answer.md", "landing_caption": "landing_caption.md"}


def toc_file() -> Path:
    """The book's table of contents: `_toc.yml` of the study's root (`paths.study_root`)."""
    return study_root() / "_toc.yml"


def toc_files(toc: Path | None = None) -> list[str]:
    """Every page of the book's table of contents (`toc`, else `toc_file()`), in reading order, as docnames
    (`book/intro`); a `glob` entry stands for the pages it matches beside the table of contents, in name order, as
    the book build takes them."""
    toc = Path(toc or toc_file())

    def walk(node: object) -> Iterator[str]:
        if isinstance(node, dict):
            for key in ("root", "file"):
                if key in node:
                    yield str(node[key])
            if "glob" in node:
                yield from sorted(str(page.relative_to(toc.parent).with_suffix("")) for suffix in (".md", ".ipynb")
                                  for page in toc.parent.glob(f"{node['glob']}{suffix}"))
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key) or []:
                    yield from walk(child)

    return [re.sub(r"\.(ipynb|md)$", "", name) for name in walk(yaml.safe_load(toc.read_text()))]


def claim_pages(toc: Path | None = None) -> dict[str, str]:
    """Claim number -> the docname of its page in the table of contents (`book/claims/01_cudnn_fallback`)."""
    return {Path(name).name[:2]: name for name in toc_files(toc)
            if name.startswith("book/claims/") and re.match(r"\d\d_", Path(name).name)}


def missing_pages(root: Path) -> list[str]:
    """What `lstmstudy reproduce` writes that the book needs and does not exist yet: the pages of the table of
    contents, the page of each claim notebook (which the table of contents takes whole) and the landing page's
    table of claims, glossary, answer and caption."""
    claims = [f"book/claims/{notebook.stem}" for notebook in sorted((root / "notebooks").glob(CLAIM_NOTEBOOKS))]
    pages = [name for name in dict.fromkeys([*toc_files(root / "_toc.yml"), *claims])
             if not any((root / f"{name}{suffix}").exists() for suffix in (".md", ".ipynb"))]
    written = (CLAIMS_TABLE, GLOSSARY, *LANDING_TEXTS.values())
    return pages + [f"book/{name}" for name in written if not (root / "book" / name).exists()]
