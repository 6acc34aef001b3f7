"""The rendering house without the measuring one: the claims and what the pages share import, and judge the
committed results and build the ledger, with torch, TensorFlow, Keras and pynvml blocked, as they do with the
measuring stack there (issue 26). One subprocess imports them all, blocked, and prints what it judged and the
ledger; the tests compare those with the same computed here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lstmstudy import results
from lstmstudy.claims import registry

ROOT = Path(__file__).resolve().parent.parent
#: every entry of the registry, by name
CLAIMS = {claim.name: claim for claim in registry()}
#: what the pages share besides the claims
SHARED = ("lstmstudy.hardware", "lstmstudy.published", "lstmstudy.published_rules", "lstmstudy.notebook",
          "lstmstudy.ledger")

BLOCKED_RUN = f"""
import importlib, json, sys
from lstmstudy.houses import block_measuring, measuring_loaded

block_measuring()
from lstmstudy import results
for name in {SHARED!r}:
    importlib.import_module(name)
from lstmstudy.claims import registry
judged = {{}}
for claim in registry():
    frame = results.load(claim.name)
    assert claim.judge(frame.iloc[0:0]) == []
    judged[claim.name] = [[v.hardware_id, v.outcome.value, v.ours_text] for v in claim.judge(frame)]
ledger = sys.modules["lstmstudy.ledger"].table().to_json(orient="records")
print(json.dumps({{"judged": judged, "ledger": ledger}}))
assert not measuring_loaded()
"""


def judged_here(name: str) -> list[list[str]]:
    claim = CLAIMS[name]
    return [[v.hardware_id, v.outcome.value, v.ours_text] for v in claim.judge(results.load(claim.name))]


@pytest.fixture(scope="module")
def blocked(request, tmp_path_factory) -> dict:
    """What `BLOCKED_RUN` printed, computed once per test run (it judges every claim: tens of seconds)."""
    from conftest import once_per_run

    def run() -> dict:
        done = subprocess.run([sys.executable, "-c", BLOCKED_RUN], cwd=ROOT, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    return once_per_run(request.config, tmp_path_factory, "two_houses_blocked", run)


@pytest.mark.parametrize("name", list(CLAIMS))
def test_a_claim_judges_its_stored_results_without_the_measuring_stack(blocked, name):
    assert blocked["judged"][name] == judged_here(name)


def test_the_claims_that_judge_have_stored_results_to_judge(blocked):
    assert all(blocked["judged"][name] for name, claim in CLAIMS.items() if claim.number)


def test_the_ledger_renders_without_the_measuring_stack(blocked, ledger_table):
    assert json.loads(blocked["ledger"]) == json.loads(ledger_table.to_json(orient="records"))
