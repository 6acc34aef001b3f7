"""Every version of each claim's rule, and what each stored set read under the earlier ones.

A claim's rule (`Claim.rule`) is stated before the data. When it changes after a set was judged, a reader must see
what that set read before, or a verdict could be chosen after the fact. `rule_history.json`, beside this module,
holds per claim each version the book stated (its text, the date and commit of the ledger that first printed it, and
why it changed) and each stored set's verdict as the ledger last printed it under each version.
`scripts/rule_history.py` writes it from the ledger's git history; tests/test_rule_history.py fails when a claim's
rule is not its newest version. Torch-free: the pages and the ledger read it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pandas as pd

HISTORY_FILE = Path(__file__).with_name("rule_history.json")
RECORD = "python scripts/rule_history.py --why NUMBER=TEXT"


@dataclass(frozen=True)
class RuleVersion:
    """One version of a claim's rule: its text, when the book first stated it (`commit`: None until the ledger that
    prints it is committed) and why it replaced the one before."""

    text: str
    date: str
    commit: str | None
    why: str


@dataclass(frozen=True)
class EarlierVerdict:
    """A set's verdict as the ledger printed it under an earlier version of its claim's rule (`version`: its index)."""

    hardware_id: str
    version: int
    date: str
    commit: str
    verdict: str
    figure: str


@cache
def _load() -> dict:
    return json.loads(HISTORY_FILE.read_text())


def versions(number: str) -> list[RuleVersion]:
    """Claim `number`'s rule (or a second statement's: `key`), oldest version first (empty before any history)."""
    return [RuleVersion(**v) for v in _load().get(number, {}).get("versions", [])]


def earlier_verdicts(number: str, hardware_ids: Sequence[str] | None = None) -> list[EarlierVerdict]:
    """The verdicts stored sets (`hardware_ids`, or every one) got under versions of the rule before the newest."""
    newest = len(versions(number)) - 1
    return [EarlierVerdict(**v) for v in _load().get(number, {}).get("verdicts", [])
            if v["version"] < newest and (hardware_ids is None or v["hardware_id"] in hardware_ids)]


def key(number: str, statement: int = 1) -> str:
    """Where the history keeps the rule of a claim's `statement`-th statement: '04' for its own, '04.2' for a second
    it judges beside it (claim 4's Mode 1 against Mode 2)."""
    return number if statement == 1 else f"{number}.{statement}"


def stated(ledger: pd.DataFrame) -> dict[str, str]:
    """Every rule the ledger (`ledger.table`) decides by, under its history key (`key`), in statement order."""
    own = ledger[ledger["evidence"] != "published"]
    return {key(number, i + 1): rule for number, rows in own.groupby("claim", sort=True)
            for i, rule in enumerate(dict.fromkeys(rows["rule"]))}


def problems(rules: Mapping[str, str]) -> list[str]:
    """One line per rule (`stated`) that is not the newest version recorded under its key: a rule changed without
    its history."""
    out = []
    for name, text in rules.items():
        recorded = versions(name)
        if not recorded or recorded[-1].text != text:
            out.append(f"the rule of {name} is not the newest in {HISTORY_FILE.name}: record the change with "
                       f"`{RECORD}` (NUMBER {name})")
    return out


def headline(figure: str) -> str:
    """A verdict's figure up to its first semicolon, with any parenthesis cut there closed."""
    cut = figure.split(";")[0].strip()
    return cut + ")" * max(0, cut.count("(") - cut.count(")"))


def history_table(number: str) -> pd.DataFrame:
    """The page's table of a rule's versions, newest first: when the book first stated each, and why."""
    rows = [{"version": i + 1, "stated from": f"{v.date} ({v.commit or 'not yet committed'})", "why it changed": v.why,
             "rule": v.text} for i, v in enumerate(versions(number))]
    return pd.DataFrame(rows, columns=["version", "stated from", "why it changed", "rule"]).iloc[::-1]


def earlier_table(number: str, current: Sequence) -> pd.DataFrame:
    """Each stored set judged under an earlier version of the rule: what it read then (the ledger's last print under
    each earlier version) beside its verdict now (`current`: the claim's verdicts)."""
    now = {v.hardware_id: f"{v.outcome.value}: {headline(v.ours_text)}" for v in current}
    rows = [{"hardware set": e.hardware_id, "rule version": e.version + 1, "printed": f"{e.date} ({e.commit})",
             "verdict then": f"{e.verdict}: {headline(e.figure)}", "verdict now": now[e.hardware_id]}
            for e in earlier_verdicts(number, list(now))]
    return pd.DataFrame(rows, columns=["hardware set", "rule version", "printed", "verdict then", "verdict now"])
