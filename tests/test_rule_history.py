"""Each claim's rule is the newest version of its recorded history, and the history says what stored sets read
under the earlier versions (lstmstudy/rule_history.json, written by scripts/rule_history.py)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pandas as pd
import pytest

from lstmstudy import notebook, rule_history
from lstmstudy.claims import registry
from lstmstudy.rules import Outcome, Verdict

ROOT = Path(__file__).resolve().parent.parent
CLAIMS = registry(judged_only=True)


def _script():
    spec = importlib.util.spec_from_file_location("rule_history_script", ROOT / "scripts" / "rule_history.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def stated(ledger_table) -> dict[str, str]:
    return rule_history.stated(ledger_table)


def test_every_rule_the_ledger_decides_by_is_the_newest_version_of_its_history(stated):
    assert {"01", "04", "04.2", "07"} <= set(stated)  # claim 4's second statement has a history of its own
    assert stated["01"] == CLAIMS[0].rule
    assert rule_history.problems(stated) == []


@pytest.mark.parametrize("name", ["01", "04.2"])
def test_a_rule_changed_without_a_history_entry_is_named(stated, name):
    recorded = {key: rule_history.versions(key)[-1].text for key in stated}
    assert rule_history.problems(recorded) == []
    (problem,) = rule_history.problems({**recorded, name: recorded[name] + "; and one more condition"})
    assert problem.startswith(f"the rule of {name} is not the newest") and "scripts/rule_history.py" in problem


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.stem)
def test_every_version_is_dated_and_says_why(claim):
    versions = rule_history.versions(claim.number)
    assert [v.date for v in versions] == sorted(v.date for v in versions)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d", v.date) and v.why.strip() for v in versions)
    assert all(re.fullmatch(r"[0-9a-f]{7,40}", v.commit) for v in versions if v.commit is not None)
    assert all(a.text != b.text for a, b in zip(versions, versions[1:]))  # a version is a change


def test_the_h100_set_was_first_judged_under_chollets_band_alone_and_the_page_says_so():
    """The first GPU set was rendered under claim 1's 2-5x rule ('exceeds the seed', 8.47x) before the rule took
    the Q&A's 15x in; its page and the ledger show that verdict beside today's."""
    h100 = "cuda-h100-80gb-hbm3-2a1d35"
    (then,) = [e for e in rule_history.earlier_verdicts("01", [h100]) if e.commit == "20ba031"]
    assert then.verdict == "exceeds the seed" and then.figure.startswith("8.47x")
    assert "2-5x" in rule_history.versions("01")[then.version].text
    claim = CLAIMS[0]
    now = Verdict(claim.name, claim.statement, h100, claim.seed_figure, 9.0, "9.00x; more", Outcome.REPRODUCED,
                  claim.rule)
    history = notebook.rule_glue(claim, [now])["c01_rule_history"]
    assert f"| {h100} |" in history and "exceeds the seed: 8.47x (" in history and "reproduced: 9.00x |" in history


def test_the_script_reads_the_ledgers_tables():
    script = _script()
    verdicts = ("| claim and source | seed's figure | hardware set | verdict | our figure |\n| --- | --- | --- | --- | --- |\n"
                "| {doc}`Claim 5 </book/claims/05_bucketing>`: x | y | `cpu-a` (CPU analogue) | **partly** | 1.8x (1.7-2.0) |\n"
                "|  |  | `cuda-b` (GPU) | not reproduced | 0.96x; keras\\_x |\n"
                "| {doc}`Claim 5 </book/claims/05_bucketing>`: a second statement | z | `cpu-a` (CPU analogue) | "
                "holds | 9x |\n")
    assert script.verdicts_of(verdicts) == {("05", "cpu-a"): ("partly", "1.8x (1.7-2.0)"),
                                            ("05", "cuda-b"): ("not reproduced", "0.96x; keras_x")}
    rules = ("<table><tr><th>claim</th></tr><tr><td>05</td><td>S</td><td>reproduced if &gt; 2x</td></tr>"
             "<tr><td>05</td><td>a second statement</td><td>at batch <= 16, holds if > 9x</td></tr></table>")
    assert script.rules_of(rules) == {"05": "reproduced if > 2x", "05.2": "at batch <= 16, holds if > 9x"}


def test_the_ledger_lists_every_earlier_rule_under_which_a_set_read_another_outcome():
    """Claim 1's H100 set read 'exceeds the seed' (8.47x) under version 3, before the Q&A's 15x joined the band;
    the ledger shows it beside any other verdict now, and leaves it out where the outcome is the same."""
    from lstmstudy import ledger

    h100 = "cuda-h100-80gb-hbm3-2a1d35"

    def frame(verdict: str):
        return pd.DataFrame([{"claim": "01", "hardware": h100, "evidence": "GPU", "verdict": verdict,
                              "page": "book/claims/01_cudnn_fallback", "our figure": "1.00x (0.9-1.1); more"}])

    changed = ledger.earlier_rules(frame("reproduced"))
    assert f"| `{h100}` | rule version 3 of " in changed and "(2026-11-26, 20ba031) | exceeds the seed: 8.47x (" in changed
    assert "| reproduced: 1.00x (0.9-1.1) |" in changed
    assert "exceeds the seed: 8.47x" not in ledger.earlier_rules(frame("exceeds the seed"))
