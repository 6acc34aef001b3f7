"""A set measured from outside the checkout, into a folder of its own, is one the book renders (issue 38): measure
claim 1's quick grid with the current folder elsewhere, then render claim 1's page from that folder alone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lstmstudy import results
from lstmstudy.cli import execute
from lstmstudy.paths import study_root


def lstmstudy(*args: str, cwd, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lstmstudy", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow  # it measures, then runs a page
def test_a_set_measured_elsewhere_is_rendered_by_the_checkout(tmp_path, monkeypatch):
    elsewhere, store, pages = tmp_path / "elsewhere", tmp_path / "x", tmp_path / "pages"
    elsewhere.mkdir()
    pages.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("KERAS_BACKEND", "LSTMSTUDY_KERAS_BACKEND_CHOSEN", "LSTMSTUDY_RESULTS", "LSTMSTUDY_ROOT")}
    done = lstmstudy("measure", "--device", "cpu", "--quick", "--claims", "01", "--results", str(store),
                     "--no-progress", cwd=elsewhere, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not list(elsewhere.iterdir()), "measuring writes nothing into the current folder"
    (hardware_id,) = {path.stem for path in store.glob("cudnn_fallback/*.csv")}
    assert results.read_rows(results.set_path("cudnn_fallback", hardware_id, store))
    # the page alone, as `reproduce --no-measure --claims 01` renders it (its summary pages read every set alike)
    monkeypatch.setenv("LSTMSTUDY_RESULTS", str(store))
    page = pages / "01_cudnn_fallback.ipynb"
    execute(study_root() / "notebooks" / page.name, page, {"device": "cpu", "measure": False, "quick": False},
            measuring=False)
    assert hardware_id in page.read_text(), "the page shows the set measured elsewhere"
