"""The built book in a real browser: headless Chromium opens every page from a local HTTP server.

It fails on an image that does not load, a link inside the book that leads nowhere, a page whose
glued values did not render, and any file the browser asked for that the server did not have. It
saves screenshots of the ledger and of the first claim page under $LSTMSTUDY_ARTIFACTS (default
/tmp/lstmstudy-artifacts).

Chromium comes from the distribution (`make install` runs `apt-get install chromium` where it is
missing and it can); where there is none this test fails rather than skips, so CI cannot pass
without it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import threading
import urllib.error
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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


@pytest.mark.parametrize("name", sorted(SCREENSHOTS))
def test_screenshot(name, built_book, server, chromium, tmp_path):
    out = artifacts() / f"{name}.png"
    out.unlink(missing_ok=True)
    done = run_chromium(chromium, tmp_path / "profile", f"--screenshot={out}", "--window-size=1280,2000",
                        server.origin + SCREENSHOTS[name])
    assert done.returncode == 0 and out.is_file(), done.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(out)
    assert pixels.shape[:2] == (2000, 1280)
    assert pixels.std() > 0.01, f"{out} is blank"
