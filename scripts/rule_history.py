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

from lstmstudy import rule_history  # noqa: E402
from lstmstudy.claims import registry  # noqa: E402

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
    """claim number -> rule text, from the ledger's HTML table of rules."""
    out = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table, re.S):
        cells = [html.unescape(re.sub(r"<.*?>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        if len(cells) >= 3:
            out.setdefault(cells[0], cells[-1])  # a claim's own rule comes first; a second statement's after it
    return out


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


def build(why: dict[str, str]) -> dict:
    old = json.loads(rule_history.HISTORY_FILE.read_text()) if rule_history.HISTORY_FILE.exists() else {}
    said = {(n, v["text"]): v for n, claim in old.items() for v in claim["versions"] if v["commit"]}
    history: dict[str, dict] = {}
    for line in git("log", "--reverse", "--format=%h %cs %s", "--", LEDGER).splitlines():
        commit, date, subject = line.split(" ", 2)
        verdicts, rules = outputs(commit)
        for number, text in rules_of(rules).items():
            claim = history.setdefault(number, {"versions": [], "verdicts": []})
            if not claim["versions"] or claim["versions"][-1]["text"] != text:  # what an entry says by hand stays
                first = "the rule as the book first stated it" if not claim["versions"] else subject.split(": ")[0]
                claim["versions"].append(said.get((number, text)) or {"text": text, "date": date, "commit": commit,
                                                                       "why": first})
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
    for claim in registry(judged_only=True):
        versions = history.setdefault(claim.number, {"versions": [], "verdicts": []})["versions"]
        if not versions or versions[-1]["text"] != claim.rule:
            pending = next((v for v in old.get(claim.number, {}).get("versions", []) if v["text"] == claim.rule), None)
            if not (why.get(claim.number) or pending):
                raise SystemExit(f"claim {claim.number}'s rule changed: say why with --why {claim.number}=TEXT")
            versions.append(pending or {"text": claim.rule, "date": today, "commit": None, "why": ""})
            versions[-1]["why"] = why.get(claim.number) or versions[-1]["why"]
    return dict(sorted(history.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--why", action="append", default=[], metavar="NUMBER=TEXT",
                        help="why claim NUMBER's rule changed (for a rule the ledger has not printed yet)")
    args = parser.parse_args()
    why = dict(item.split("=", 1) for item in args.why)
    rule_history.HISTORY_FILE.write_text(json.dumps(build(why), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {rule_history.HISTORY_FILE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
