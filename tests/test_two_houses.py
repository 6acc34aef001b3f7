"""The rendering house without the measuring one: claims whose measuring moved to `lstmstudy.protocols` import,
and judge the committed results, with torch, TensorFlow, Keras and pynvml blocked, and judge them as they do with
the measuring stack there (issue 26)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lstmstudy import results
from lstmstudy.claims import energy, frameworks_vs_baseline

ROOT = Path(__file__).resolve().parent.parent
MEASURING = ("torch", "tensorflow", "keras", "pynvml")
CLAIMS = {"energy": energy, "frameworks_vs_baseline": frameworks_vs_baseline}

BLOCKED_RUN = f"""
import importlib, importlib.abc, json, sys

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {MEASURING!r}:
            raise ModuleNotFoundError(f"blocked: {{name}}", name=name)
        return None

sys.meta_path.insert(0, Blocked())
from lstmstudy import results

claim = importlib.import_module("lstmstudy.claims." + sys.argv[1])
frame = results.load(claim.NAME)
assert claim.verdicts(frame.iloc[0:0]) == []
print(json.dumps([[v.hardware_id, v.outcome.value, v.ours_text] for v in claim.verdicts(frame)]))
assert not [name for name in sys.modules if name.split(".")[0] in {MEASURING!r}]
"""


@pytest.mark.parametrize("module", sorted(CLAIMS))
def test_a_claim_judges_its_stored_results_without_the_measuring_stack(module):
    done = subprocess.run([sys.executable, "-c", BLOCKED_RUN, module], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    claim = CLAIMS[module]
    expected = [[v.hardware_id, v.outcome.value, v.ours_text] for v in claim.verdicts(results.load(claim.NAME))]
    assert json.loads(done.stdout) == expected and expected
