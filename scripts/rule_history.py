"""Write lstmstudy/rule_history.json: every version of each claim's rule that the book stated, and each stored set's
verdict under every earlier one, read from the rendered ledger's git history (book/ledger.ipynb at each commit).

    python scripts/rule_history.py --why 01="the seeds' own cases decide, per trigger and backend"

A version is dated by the commit whose ledger first printed it, and its reason is the first clause of that commit's
subject; an entry edited by hand (a truer date, commit or reason) is kept. Where a claim's code states a rule the ledger has not printed yet (a rule changed in the working
tree), it becomes the newest version, dated today with no commit yet, and `--why NUMBER=TEXT` says why it changed:
tests/test_rule_history.py fails until it is recorded. Needs git and a checkout with its history.
"""

from __future__ import annotations

import argparse
import datetime
import html
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lstmstudy import ledger, rule_history  # noqa: E402

LEDGER = "book/ledger.ipynb"


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout


def outputs(commit: str) -> tuple[str, str]:
    """The ledger's table of verdicts (Markdown) and its table of rules (HTML) as rendered at `commit`."""
    page = json.loads(git("show", f"{commit}:{LEDGER}"))
    found = {"text/markdown": "", "text/html": ""}
    for cell in page["cells"]:
        for output in cell.get("outputs", []):
            for kind in found:
                text = "".join(output.get("data", {}).get(kind, ""))
                if text.startswith("| claim and source") or (kind == "text/html" and "rule" in text):
                    found[kind] = found[kind] or text
    return found["text/markdown"], found["text/html"]


def rules_of(table: str) -> dict[str, str]:
    """History key (`rule_history.key`) -> rule text, from the ledger's HTML table of rules, where a claim's own rule
    comes first and a second statement's after it."""
    found: dict[str, list[str]] = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table, re.S):
        cells = [html.unescape(re.sub(r"</?[A-Za-z][^<>]*>", "", c)).strip()  # tags only: a rule may say "<= 16"
                 for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        if len(cells) >= 3:
            found.setdefault(cells[0], []).append(cells[-1])
    return {rule_history.key(number, i + 1): text for number, texts in found.items() for i, text in enumerate(texts)}


def verdicts_of(table: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(claim number, hardware set) -> (verdict, our figure), from the ledger's Markdown table of verdicts."""
    out, number, own = {}, "", False
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if len(cells) < 5:
            continue
        if found := re.search(r"Claim (\d+) ", cells[0]):  # a block of rows: a claim's own statement, or a second
            own = f"{int(found.group(1)):02d}" != number
            number = f"{int(found.group(1)):02d}"
        if own and (hardware := re.match(r"`([^`]+)`", cells[2])):
            out[number, hardware.group(1)] = tuple(re.sub(r"\\(.)", r"\1", c.replace("**", "")) for c in cells[3:5])
    return out


def build(why: dict[str, str], stated: dict[str, str]) -> dict:
    """The history from the ledger's commits, then each rule of `stated` (`rule_history.stated`) the ledger has not
    printed yet. An entry of the old file with the same text keeps its reason, and its date and commit where it has
    one (a version recorded before its ledger was committed takes that commit's)."""
    old = json.loads(rule_history.HISTORY_FILE.read_text()) if rule_history.HISTORY_FILE.exists() else {}
    said = {(n, v["text"]): v for n, claim in old.items() for v in claim["versions"]}
    history: dict[str, dict] = {}
    for line in git("log", "--reverse", "--format=%h %cs %s", "--", LEDGER).splitlines():
        commit, date, subject = line.split(" ", 2)
        verdicts, rules = outputs(commit)
        for number, text in rules_of(rules).items():
            claim = history.setdefault(number, {"versions": [], "verdicts": []})
            if not claim["versions"] or claim["versions"][-1]["text"] != text:  # what an entry says by hand stays
                first = "the rule as the book first stated it" if not claim["versions"] else subject.split(": ")[0]
                kept = said.get((number, text), {})
                claim["versions"].append({"text": text, "date": kept.get("date") if kept.get("commit") else date,
                                          "commit": kept.get("commit") or commit, "why": kept.get("why") or first})
        for (number, hardware), (verdict, figure) in verdicts_of(verdicts).items():
            if number not in history:
                continue
            version = len(history[number]["versions"]) - 1
            entry = {"hardware_id": hardware, "version": version, "date": date, "commit": commit, "verdict": verdict,
                     "figure": figure}
            mine = history[number]["verdicts"]
            same = [i for i, e in enumerate(mine) if (e["hardware_id"], e["version"]) == (hardware, version)]
            if same:  # the newest rendering under one version: the figure as that rule last read it
                mine[same[0]] = entry
            else:
                mine.append(entry)
    today = datetime.date.today().isoformat()
    for name, text in stated.items():
        versions = history.setdefault(name, {"versions": [], "verdicts": []})["versions"]
        if not versions or versions[-1]["text"] != text:
            pending = said.get((name, text))
            if not (why.get(name) or pending):
                raise SystemExit(f"the rule of {name} changed: say why with --why {name}=TEXT")
            versions.append(pending or {"text": text, "date": today, "commit": None, "why": ""})
            versions[-1]["why"] = why.get(name) or versions[-1]["why"]
    return dict(sorted(history.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--why", action="append", default=[], metavar="NUMBER=TEXT",
                        help="why claim NUMBER's rule changed ('04.2': its second statement's), for a rule the ledger has "
                             "not printed yet")
    args = parser.parse_args()
    why = dict(item.split("=", 1) for item in args.why)
    stated = rule_history.stated(ledger.table())
    rule_history.HISTORY_FILE.write_text(json.dumps(build(why, stated), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {rule_history.HISTORY_FILE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
