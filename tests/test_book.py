"""The book build is a test: it must build from the committed pages with warnings treated as errors."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.slow
def test_book_builds_without_warnings(tmp_path):
    out = subprocess.run([sys.executable, "-m", "lstmstudy.cli", "book", "--path-output", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (tmp_path / "_build" / "html" / "index.html").exists()
    assert (tmp_path / "_build" / "html" / "book" / "reproduce.html").exists()
