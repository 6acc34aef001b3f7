"""The built book in a real browser: headless Chromium opens every page from a local HTTP server.

It fails on an image that does not load, a link inside the book that leads nowhere, a page whose
glued values did not render, and any file the browser asked for that the server did not have. Then it
reads the pages as a reader would, on a laptop (1280 px) and on a phone (400 px): every image loads;
the landing page and each claim page's opening box do not scroll sideways at 1280 px; no page shows a
Python repr, a traceback or a float printed to ten digits or more; a claim page's visible text
(dropdowns closed) stays under about 1,500 words. A page is measured inside an iframe of the width
asked for (Chromium's window cannot be narrower than 500 px), by a script the test's server adds to
it. It saves screenshots of the landing page, the ledger and the first claim page at both widths
under $LSTMSTUDY_ARTIFACTS (default /tmp/lstmstudy-artifacts).

Chromium comes from the distribution (`make install` runs `apt-get install chromium` where it is
missing and it can); where there is none this test fails rather than skips, so CI cannot pass
without it.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from htmlpages import (
    Page,
    fragment,
    glue_problems,
    local_url,
    pages,
    redirect_of,
    source_of,
)

pytestmark = pytest.mark.slow

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]
SCREENSHOTS = {"landing": "book/intro.html", "ledger": "book/ledger.html",
               "claim-01": "book/claims/01_cudnn_fallback.html"}
#: a laptop's and a phone's width, in CSS px
WIDTHS = (1280, 400)
#: what a claim page may show with its dropdowns closed (the issue's "about 1,500 words")
CLAIM_PAGE_WORDS = 1500
#: what no rendered text may hold: a Python repr, a traceback or an exception's name, a missing value printed raw,
#: a float printed to its repr's ten digits or more (a source's own figures, quoted verbatim, run to eight: claim 4's MPE)
RAW = re.compile(r"frozenset\(|\bOutcome\.[A-Z_]+|<NA>|\bNaN\b|\bnan\b|Traceback \(most recent|\b\w*(Error|Exception): |"
                 r"<IPython\.|object at 0x|\d\.\d{10,}")
#: run in a page by the server (`?probe`): what a reader sees, as JSON in a <pre id="probe"> the test reads back
PROBE = """<script>window.addEventListener("load", function () {
  var article = document.querySelector("article") || document.body, out = {};
  out.broken = Array.from(document.images).filter(function (i) { return !(i.complete && i.naturalWidth); })
    .map(function (i) { return i.getAttribute("src"); });
  out.words = (article.innerText.match(/\\S+/g) || []).length;
  out.width = document.documentElement.scrollWidth; out.viewport = window.innerWidth;
  var all = article.cloneNode(true);
  all.querySelectorAll(".cell_input, script, style").forEach(function (e) { e.remove(); });
  out.text = all.textContent;
  out.wide = [];
  article.querySelectorAll(".admonition, .admonition table, .pst-scrollable-table-container").forEach(function (e) {
    if (e.checkVisibility() && e.scrollWidth > e.clientWidth + 1 && (e.closest(".admonition") || e.closest(".landing-table")))
      out.wide.push(e.className.split(" ")[0] + " " + e.scrollWidth + " px in " + e.clientWidth + ": "
                    + e.innerText.slice(0, 60).replace(/\\s+/g, " "));
  });
  var p = document.createElement("pre"); p.id = "probe"; p.textContent = JSON.stringify(out);
  document.body.appendChild(p);
});</script>"""
#: the page the server returns for `/__at_width__?w=W&page=P`: P in an iframe W px wide, its probe copied out
AT_WIDTH = """<html><body style="margin:0"><iframe id="page" src="/{page}?probe" style="width:{w}px;height:2000px;border:0">
</iframe><script>document.getElementById("page").addEventListener("load", function () {{
  var found = this.contentDocument.getElementById("probe"), p = document.createElement("pre");
  p.id = "result"; p.textContent = found ? found.textContent : "{{}}"; document.body.appendChild(p); }});
</script></body></html>"""
IGNORED_REQUESTS = {"/favicon.ico"}  # asked for by the browser itself, not by a page


def artifacts() -> Path:
    folder = Path(os.environ.get("LSTMSTUDY_ARTIFACTS") or "/tmp/lstmstudy-artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def chromium() -> str:
    found = os.environ.get("LSTMSTUDY_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("chromium is not installed, so the book cannot be checked in a real browser. `make install` "
                    "installs it with apt-get where it runs as root on Debian or Ubuntu; elsewhere install "
                    "Chromium and put it on PATH, or set LSTMSTUDY_CHROMIUM to its binary.", pytrace=False)
    return found


class _Server:
    """The build served on 127.0.0.1 in a thread; `requests` logs every (path, status) served."""

    def __init__(self, root: Path) -> None:
        self.requests: list[tuple[str, int]] = []
        log = self.requests

        class Handler(SimpleHTTPRequestHandler):
            def log_request(self, code="-", size="-") -> None:
                log.append((self.path.split("?")[0], int(getattr(code, "value", code))))

            def log_message(self, *args) -> None:
                pass

            def send_head(self):
                url = urlsplit(self.path)
                if url.path == "/__at_width__":
                    asked = parse_qs(url.query)
                    return self._send(AT_WIDTH.format(w=asked["w"][0], page=asked["page"][0]).encode())
                path = Path(self.translate_path(self.path))
                if url.query == "probe" and path.suffix == ".html" and path.is_file():
                    return self._send(path.read_bytes().replace(b"</body>", PROBE.encode() + b"</body>"))
                return super().send_head()

            def _send(self, body: bytes):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                return io.BytesIO(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.origin = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def status(self, url: str) -> int:
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                return response.status if response.read() else 204  # an empty file is as bad as none
        except urllib.error.HTTPError as exc:
            return exc.code

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def server(built_book):
    built_book.check()
    serving = _Server(built_book.html)
    yield serving
    serving.close()


def run_chromium(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


def test_every_page_renders_with_its_images_links_and_glued_values(built_book, server, chromium, tmp_path):
    problems: list[str] = []
    status: dict[str, int] = {}
    dom_ids: dict[str, set[str]] = {}
    anchors: list[tuple[Path, str, str]] = []  # (page, href, target URL) of links to an anchor in the book

    def fetched(url: str) -> int:
        if url not in status:
            status[url] = server.status(url)
        return status[url]

    for relative in pages(built_book.html):
        url = server.origin + relative.as_posix()
        if (redirect := redirect_of((built_book.html / relative).read_text())) is not None:
            if fetched(local_url(url, redirect) or redirect) != 200:
                problems.append(f"{relative}: redirects to {redirect}, which does not load")
            continue
        before = len(server.requests)
        done = run_chromium(chromium, tmp_path / "profile", "--dump-dom", url)
        if done.returncode != 0 or "<body" not in done.stdout:
            problems.append(f"{relative}: chromium could not render it: {done.stderr[-500:]}")
            continue
        page = Page.parse(done.stdout)
        dom_ids[url] = page.ids
        failed = [(p, s) for p, s in server.requests[before:] if s >= 400 and p not in IGNORED_REQUESTS]
        problems += [f"{relative}: the browser asked for {p} and got {s}" for p, s in failed]
        for src in page.images:
            target = local_url(url, src)
            if src.startswith("data:"):
                continue
            if target is None:
                problems.append(f"{relative}: image {src} is not part of the book")
            elif fetched(target) != 200:
                problems.append(f"{relative}: image {src} does not load ({fetched(target)})")
        for href in page.links:
            target = local_url(url, href)
            if target is not None and fetched(target) != 200:
                problems.append(f"{relative}: link {href} leads to {fetched(target)}")
            elif target is not None and fragment(href):
                anchors.append((relative, href, target))
        if (source := source_of(relative)) is not None:
            problems += [f"{relative}: {p}" for p in glue_problems(source, page)]
    # an anchor is looked up in the rendered DOM of its target page, once every page has been opened
    problems += [f"{relative}: link {href} has no anchor {fragment(href)!r} in its target"
                 for relative, href, target in anchors
                 if target in dom_ids and fragment(href) not in dom_ids[target]]
    assert not problems, "\n".join(problems)


def at_width(server: _Server, page: str, width: int) -> str:
    """The URL that shows `page` in a frame `width` px wide (`AT_WIDTH`)."""
    return f"{server.origin}__at_width__?w={width}&page={page}"


def read(chromium: str, profile: Path, server: _Server, page: str, width: int) -> dict:
    """What a reader sees of `page` at `width` px (`PROBE`): visible words, widths, the text shown, what scrolls."""
    done = run_chromium(chromium, profile, f"--window-size={max(width, 500) + 20},2100", "--dump-dom",
                        at_width(server, page, width))
    found = re.search(r'<pre id="result"[^>]*>(.*?)</pre>', done.stdout, re.S)
    assert found, f"{page} at {width} px: the probe did not report ({done.stderr[-500:]})"
    from html import unescape

    return json.loads(unescape(found.group(1)))


@pytest.mark.parametrize("width", WIDTHS)
def test_a_reader_sees_every_image_no_raw_python_no_sideways_scrolling_and_short_claim_pages(width, built_book, server, chromium,
                                                                                 tmp_path):
    problems, words = [], {}
    for relative in pages(built_book.html):
        page = relative.as_posix()
        if redirect_of((built_book.html / relative).read_text()) is not None:
            continue
        seen = read(chromium, tmp_path / "profile", server, page, width)
        assert seen["viewport"] == width, f"{page}: laid out at {seen['viewport']} px, not {width}"
        problems += [f"{page} at {width} px: image {src} did not load" for src in seen["broken"]]
        problems += [f"{page} at {width} px shows {m.group(0)!r}: ...{seen['text'][max(0, m.start() - 60):m.end() + 40]!r}"
                     for m in RAW.finditer(seen["text"])]
        if width == max(WIDTHS):
            if page == SCREENSHOTS["landing"] and seen["width"] > width:
                problems.append(f"{page} scrolls sideways at {width} px ({seen['width']} px wide)")
            problems += [f"{page}: the box or landing table scrolls sideways at {width} px: {w}" for w in seen["wide"]]
            if page.startswith("book/claims/"):
                words[page] = seen["words"]
    problems += [f"{page}: {n} words in view with dropdowns closed (at most {CLAIM_PAGE_WORDS})"
                 for page, n in words.items() if n > CLAIM_PAGE_WORDS]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(SCREENSHOTS))
def test_screenshot(name, width, built_book, server, chromium, tmp_path):
    out = artifacts() / f"{name}-{width}px.png"
    out.unlink(missing_ok=True)
    window = max(width, 500)  # Chromium's narrowest window: a phone's width is a frame inside it
    url = server.origin + SCREENSHOTS[name] if width == window else at_width(server, SCREENSHOTS[name], width)
    done = run_chromium(chromium, tmp_path / "profile", f"--screenshot={out}", f"--window-size={window},2000", url)
    assert done.returncode == 0 and out.is_file(), done.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(out)
    assert pixels.shape[:2] == (2000, window)
    assert pixels[:, :width].std() > 0.01, f"{out} is blank"
