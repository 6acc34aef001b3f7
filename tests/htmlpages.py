"""Reading the built book's pages: the checks test_book.py runs on the files and test_browser.py runs on
the DOM that Chromium rendered.

An unresolved `{glue:text}` renders as nothing at all (myst-nb drops the node and logs a warning), so a
page's glued values are checked by count: every `{glue:text}` role in the page's source must come
out as one non-empty `span.pasted-text`.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

ROOT = Path(__file__).resolve().parent.parent
GLUE_TEXT_ROLE = re.compile(r"\{glue:text\}`[^`]+`")
IMAGE_MIMES = ("image/png", "image/jpeg", "image/svg+xml", "image/gif")
#: the parts of a build that are not pages
NOT_PAGES = ("_static", "_sources", "_images", "_sphinx_design_static", "_panels_static")


class Page(HTMLParser):
    """The images, links, ids, glued values and visible text of one HTML page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.images: list[str] = []
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.pasted: list[str] = []  # the text of every span.pasted-text (a glued value)
        self.text: list[str] = []
        self._spans: list[list[str] | None] = []
        self._hidden = 0  # inside <script>, <style>, <pre>

    @classmethod
    def parse(cls, html: str) -> Page:
        page = cls()
        page.feed(html)
        page.close()
        return page

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "img":
            self.images.append(a.get("src", ""))
        elif tag == "a" and "href" in a:
            self.links.append(a["href"])
        elif tag == "span":
            self._spans.append([] if "pasted-text" in a.get("class", "").split() else None)
        elif tag in ("script", "style", "pre"):
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "span" and self._spans:
            collected = self._spans.pop()
            if collected is not None:
                self.pasted.append("".join(collected).strip())
        elif tag in ("script", "style", "pre") and self._hidden:
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        for collected in self._spans:
            if collected is not None:
                collected.append(data)
        if not self._hidden:
            self.text.append(data)

    @property
    def visible_text(self) -> str:
        return " ".join(self.text)


REDIRECT = re.compile(r'http-equiv="refresh"\s+content="\d+;\s*url=([^"]+)"', re.IGNORECASE)


def redirect_of(html: str) -> str | None:
    """Where a redirect-only page (the book's index.html) sends the reader, or None for a real page."""
    found = REDIRECT.search(html)
    return found.group(1) if found and "<body" not in html.lower() else None


def pages(html_dir: Path) -> list[Path]:
    """Every HTML page of a build, relative to its root."""
    return sorted(p.relative_to(html_dir) for p in html_dir.rglob("*.html")
                  if not p.relative_to(html_dir).parts[0] in NOT_PAGES)


def source_of(page: Path, root: Path = ROOT) -> Path | None:
    """The .md or .ipynb a built page came from (`book/intro.html` -> `book/intro.md`), if any."""
    stem = root / page.with_suffix("")
    return next((stem.with_suffix(s) for s in (".ipynb", ".md") if stem.with_suffix(s).exists()), None)


def _notebook(source: Path):
    import nbformat  # inside: the test files collect on a GPU node without it

    return nbformat.read(source, as_version=4)


#: a MyST `include` directive: the file it names is part of the page
INCLUDE = re.compile(r"^```\{include\} (\S+)\n```", re.M)


def markdown_of(source: Path) -> str:
    """The Markdown a page's prose is written in (every Markdown cell of a notebook; a Markdown page with the files it
    includes)."""
    if source.suffix == ".md":
        text = source.read_text()
        return INCLUDE.sub(lambda m: (source.parent / m[1]).read_text(), text)
    return "\n\n".join(c.source for c in _notebook(source).cells if c.cell_type == "markdown"
                       and "remove-cell" not in c.get("metadata", {}).get("tags", []))


def image_outputs(source: Path) -> int:
    """How many images a notebook's outputs show (cells tagged to remove them do not count)."""
    if source.suffix != ".ipynb":
        return 0
    count = 0
    for cell in _notebook(source).cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell.cell_type != "code" or tags & {"remove-output", "remove-cell"}:
            continue
        count += sum(1 for o in cell.get("outputs", []) if any(m in o.get("data", {}) for m in IMAGE_MIMES))
    return count


def glue_problems(source: Path, page: Page) -> list[str]:
    """What is wrong with a page's glued values: missing ones, empty ones, role text left in the page."""
    problems = []
    expected = len(GLUE_TEXT_ROLE.findall(markdown_of(source)))
    if len(page.pasted) != expected:
        problems.append(f"{expected} {{glue:text}} values in the source, {len(page.pasted)} rendered")
    if any(not text for text in page.pasted):
        problems.append("a glued value rendered empty")
    if "{glue" in page.visible_text:
        problems.append("glue role text left unrendered in the page")
    return problems


def local_url(page_url: str, href: str) -> str | None:
    """`href` resolved against the page, without its fragment, when it points inside the book."""
    if not href or href.startswith(("mailto:", "javascript:", "data:", "tel:")):
        return None
    url = urljoin(page_url, href)
    base, target = urlsplit(page_url), urlsplit(url)
    if (target.scheme, target.netloc) != (base.scheme, base.netloc):
        return None
    return url.split("#", 1)[0]


def fragment(href: str) -> str:
    return unquote(href.split("#", 1)[1]) if "#" in href else ""


def url_to_file(url: str, origin: str, html_dir: Path) -> Path:
    """The file of the build a local URL names (a folder means its index.html)."""
    path = unquote(urlsplit(url).path)[len(urlsplit(origin).path):]
    target = html_dir / path
    return target / "index.html" if path.endswith("/") or path == "" else target
