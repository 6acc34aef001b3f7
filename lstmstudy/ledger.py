"""The claims ledger: every claim's seed figure against ours, per hardware set, from the stored results.

The claims are the contract's list (`lstmstudy.claims.registry`), the same one the command line and the
notebooks read. The ledger page and the conclusions (`notebooks/ledger.ipynb`,
`notebooks/conclusions.ipynb`, executed into `book/` by `lstmstudy reproduce`) render from these
functions, so no verdict is written into the book by hand.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from pathlib import Path

import pandas as pd

from lstmstudy import published, published_rules, results, rule_history
from lstmstudy.claims import Claim, registry
from lstmstudy.rules import (CPU_ANALOGUE, GPU, PUBLISHED, PUBLISHED_PREFIX, Outcome, gpu_timing, one_burst_sets,
                             span, why_not_measured)
from lstmstudy.stats import NOISY_WORDS
from lstmstudy.toc import claim_pages

COLUMNS = ["claim", "statement", "source", "citations", "seed figure", "hardware", "evidence", "our figure",
           "verdict", "timing", "rule", "page", "brief", "ours", "low", "high", "parts", "headline"]
#: the outcomes of a measured verdict, in the order the conclusions name them
_PHRASES = {Outcome.REPRODUCED.value: "reproduced", Outcome.EXCEEDS.value: "exceeds the seed",
            Outcome.PARTLY.value: "partly reproduced", Outcome.NOT_REPRODUCED.value: "not reproduced",
            Outcome.INCONCLUSIVE.value: "inconclusive",
            Outcome.HOLDS.value: "holds (the study's own hypothesis)",
            Outcome.DOES_NOT_HOLD.value: "does not hold (the study's own hypothesis)"}
#: the outcomes that carry no verdict: nothing measurable, or a measurement whose noise was not assessed
_NO_VERDICT = (Outcome.NOT_MEASURED.value, Outcome.NOT_ASSESSED.value)


# --- the table --------------------------------------------------------------------------------------

def table(root: Path | None = None, *, claims: Sequence[Claim] | None = None,
          toc: Path | None = None) -> pd.DataFrame:
    """One row per claim and stored hardware set: the seed's figure, ours, the verdict and the page.

    Verdicts come from each claim's `judge(results.load(name, root))`, each with its own statement, seed
    figure and rule (claim 4 judges the paper's Mode 1 vs Mode 2 beside its own claim); a claim with no
    stored result set gets one row that says so (verdict: not measured). `evidence` says what a verdict tests: the
    seed's GPU claim (a GPU set) or its CPU analogue (a CPU set), which never counts as a reproduction. Rows of
    evidence `published` follow a claim's own: its rule on what others measured (`published_rules`), never ours.
    """
    pages = claim_pages(toc)
    rows = []
    for claim in registry(judged_only=True) if claims is None else claims:
        number = claim.number
        base = {"claim": number, "statement": claim.statement, "source": claim.source,
                "citations": ", ".join(claim.citations),
                "seed figure": claim.seed_figure, "rule": claim.rule, "page": pages.get(number, "")}
        frame = results.load(claim.name, root)
        verdicts = claim.judge(frame)
        if not verdicts:
            rows.append({**base, "hardware": "", "evidence": "", "our figure": "no stored result set",
                         "verdict": Outcome.NOT_MEASURED.value, "timing": "", "brief": "", "parts": [],
                         "headline": ""})
        # one block per statement judged (the claim's own first), each block's sets in order, then the published
        verdicts = verdicts + [v for v in published_rules.verdicts(number) if v.claim == claim.name]
        rules = list(dict.fromkeys([claim.rule, *(v.rule for v in verdicts)]))
        for v in sorted(verdicts, key=lambda v: rules.index(v.rule)):
            own = v.rule == claim.rule  # its statement is the claim's: a verdict's variant of it is in its figure
            rows.append({**base, "statement": claim.statement if own else v.statement,
                         "seed figure": claim.seed_figure if own else v.seed_figure, "rule": v.rule,
                         "hardware": v.hardware_id, "evidence": v.evidence_label, "our figure": v.ours_text,
                         "verdict": v.outcome.value,
                         "timing": "" if v.evidence == PUBLISHED else noise(frame[frame.hardware_id == v.hardware_id]),
                         # context decides nothing: its figure is not the rule's, so it gets no rule's words
                         "brief": claim.figure_words.format(v.brief) if v.brief and v.outcome != Outcome.CONTEXT
                         else "", "ours": v.ours,
                         "low": v.low, "high": v.high,
                         "parts": [list(part) for part in v.parts],
                         "headline": claim.headline(v, parts=False) if own and v.outcome != Outcome.CONTEXT else ""})
    return pd.DataFrame(rows, columns=COLUMNS)


def noise(frame: pd.DataFrame) -> str:
    """How many timed rows of a result set stayed noisy after their rounds (`timing.Rounds.noise_bound`), and of a
    GPU set, what its rows timed (`rules.gpu_timing`: how many are host-bound, or that none recorded device time)."""
    ok = frame[frame.status == "ok"] if not frame.empty else frame
    if ok.empty:
        return ""
    if one_burst_sets(frame):
        return "noise not assessed (one burst per row, measured before interleaved rounds)"
    flagged = ok["noisy"].dropna()
    noisy = f"{int(flagged.sum())} of {len(flagged)} timed rows noisy ({NOISY_WORDS})"
    return "; ".join(filter(None, [noisy, gpu_timing(frame)]))


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>|#$~])")


def _md(text: object) -> str:
    """Text as literal MyST Markdown: no emphasis, role or table cell boundary can form inside it."""
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


def _page_ref(number: str, page: str, label: str | None = None) -> str:
    label = label or f"Claim {int(number)}"
    return f"{{doc}}`{label} </{page}>`" if page else label


def _cites(keys: str) -> str:
    return f" {{cite:p}}`{keys.replace(' ', '')}`" if keys else ""


#: the landing table's columns after the source's words: what each glues from the conclusions (`landing_cells`)
LANDING = {"gpu": "measured here on GPUs", "cpu": "CPU analogue here (not counted)",
           "others": "others on their GPUs (not counted)"}


def claims_table(claims: Sequence[Claim] | None = None) -> str:
    """The landing page's table of claims (`toc.CLAIMS_TABLE`), in claim order: each one's number linked to its
    page, what its sources say (`Claim.says`), and what was found, glued from the conclusions (`landing_cells`,
    HTML: the only rich text myst-nb pastes from another page): on this study's GPUs, on its CPUs, and by others
    on theirs."""
    def cells(number: str) -> str:
        return " | ".join(f"{{glue}}`conclusions.ipynb::landing_{key}_{number}`" for key in LANDING)

    rows = [f"| {{doc}}`{int(c.number)} <claims/{c.stem}>` | {c.says} | {cells(c.number)} |"
            for c in (claims if claims is not None else registry(judged_only=True))]
    return "\n".join(["% written by `lstmstudy reproduce` from each claim's `says` (lstmstudy.ledger.claims_table): "
                      "edit those, not this file",
                      f"| claim | the source says | {' | '.join(LANDING.values())} |",
                      "| --- | --- | --- | --- | --- |", *rows]) + "\n"


def short_set(hardware: str) -> str:
    """A set's id without its fingerprint's hash, for a narrow table: 'cuda-h100-80gb-hbm3-2a1d35' ->
    'cuda-h100-80gb-hbm3'; a pair keeps both sides."""
    return " vs ".join(re.sub(r"-[0-9a-f]{6}$", "", name) for name in hardware.split(" vs "))


def _set_cell(rows: pd.DataFrame, *, bold: bool) -> str:
    """One landing cell, as HTML: each measured set's verdict and figure, the rest counted in words; in the GPU
    column (`bold`) a set the claim could not be measured on is named, with why (`why_not_measured`), since a GPU
    set is rare and what it lacks is news."""
    measured = rows[~rows["verdict"].isin(_NO_VERDICT)]
    if bold:
        parts = [f"<code>{escape(short_set(r.hardware))}</code>: <strong>{escape(r.verdict)}</strong>"
                 + (f", {escape(r.headline or r.brief)}" if r.headline or r.brief else "")
                 for r in measured.itertuples()]
        parts += [f"<code>{escape(short_set(r['hardware']))}</code>: {escape(why_not_measured(r['our figure']))}"
                  for r in rows[rows["verdict"] == Outcome.NOT_MEASURED.value].to_dict("records")]
        rows = rows[rows["verdict"] != Outcome.NOT_MEASURED.value]
    else:  # CPU sets are many: counted per outcome, with the range of their figures
        parts = [f"{escape(outcome)} on {_sets(len(group))}" + (f" ({r})" if (r := span(group["ours"])) else "")
                 for outcome, group in measured.groupby("verdict", sort=False)]
    for outcome, words in ((Outcome.NOT_ASSESSED.value, "no verdict (noise not assessed)"),
                           (Outcome.NOT_MEASURED.value, "not measurable")):
        n = int((rows["verdict"] == outcome).sum())
        if n:
            parts.append(f"{words} on {_sets(n)}")
    return "; ".join(parts)


def _sets(n: int) -> str:
    return f"{n} set{'s' if n > 1 else ''}"


def _own_statements(ledger: pd.DataFrame) -> pd.DataFrame:
    """The ledger's rows of each claim's own statement (its first rule), not of a second statement it judges."""
    return ledger[ledger["rule"] == ledger.groupby("claim")["rule"].transform("first")]


def landing_cells(ledger: pd.DataFrame, number: str) -> dict[str, str]:
    """A claim's row of the landing table, as HTML per column of `LANDING`: its own statement's verdicts on this
    study's GPU sets and CPU sets, each with its figure and interval (`Verdict.brief`), and what others
    published on their GPUs, each GPU and source named ({doc}`published` cites them)."""
    rows = _own_statements(ledger)
    rows = rows[rows["claim"] == number]
    ours = rows[rows["evidence"] != PUBLISHED]
    others = rows[rows["evidence"] == PUBLISHED]
    source, card = (others["hardware"].str.removeprefix(PUBLISHED_PREFIX).str.split("/", n=1).str[i] for i in (0, 1))
    judged = others["verdict"] != Outcome.CONTEXT.value
    listed = [f"{escape(c)} ({escape(s)}): <em>{escape(v)}</em>" + (f", {escape(b)}" if b else "")
              for c, s, v, b in zip(card[judged], source[judged], others["verdict"][judged], others["brief"][judged])]
    if not judged.all():  # context decides nothing: its GPUs in a line, each source on the published page
        listed.append(f"<em>{Outcome.CONTEXT.value}</em>: {escape(', '.join(dict.fromkeys(card[~judged])))}")
    return {"gpu": _set_cell(ours[ours["hardware"].str.startswith("cuda-")], bold=True) or "none stored",
            "cpu": _set_cell(ours[ours["hardware"].str.startswith("cpu-")], bold=False) or "none stored",
            "others": "; ".join(listed) or "none"}


def answer(ledger: pd.DataFrame, claims: Sequence[Claim] | None = None) -> str:
    """The landing page's answer, in plain sentences from the verdicts: for each claim with advice for a reader whose
    LSTM got slower (`Claim.advice`), what it was worth on each GPU set measured and what that makes of the source's
    claim; the claims a GPU has not decided yet, in one sentence with why."""
    rows = _own_statements(ledger)
    gpu_rows = rows[rows["hardware"].str.startswith("cuda-") & (rows["evidence"] != PUBLISHED)]
    if gpu_rows.empty:
        return ("**No GPU result set is stored yet**, so this book cannot yet say what any fix is worth on a GPU; "
                "the claim pages show the CPU analogues, and {doc}`add_your_gpu` adds a GPU in minutes.")
    said, waiting = [], []
    for claim in claims if claims is not None else registry(judged_only=True):
        if not claim.advice:
            continue
        mine = gpu_rows[gpu_rows["claim"] == claim.number]
        decided = mine[~mine["verdict"].isin(_NO_VERDICT) & mine["headline"].astype(bool)]
        link = _page_ref(claim.number, mine["page"].iloc[0] if len(mine) else "", f"claim {int(claim.number)}")
        if decided.empty:
            waiting.append(f"{claim.advice.rstrip('.')} ({link}: {_gpu_why(mine)})")
            continue
        on = "; ".join(f"on `{short_set(r['hardware'])}`, {r['headline']}; the source's claim: "
                       f"*{_phrase(r['verdict'])}*" for _, r in decided.iterrows())
        said.append(f"- {claim.advice} Measured ({link}) {on}.")
    if waiting:
        said.append("- Not yet decided on a GPU here: " + "; ".join(waiting) + ".")
    return ("**If your LSTM got slower on a GPU, ask these questions.** Each answer below was measured here, on the "
            "GPU named, and says which interval it carries:\n\n" + "\n".join(said))


def _gpu_why(gpu: pd.DataFrame) -> str:
    """Why a claim's GPU rows (`gpu`) carry no figure, each reason once (`why_not_measured`)."""
    return "; ".join(dict.fromkeys(why_not_measured(t) for t in gpu["our figure"])) or "no GPU set stored"


def _phrase(outcome: str) -> str:
    """An outcome as the answer's sentences say it."""
    return _PHRASES.get(outcome, outcome)


def chart_data(ledger: pd.DataFrame, claims: Sequence[Claim] | None = None
               ) -> tuple[pd.DataFrame, dict[str, str], dict[str, tuple[float, float]], dict[str, str]]:
    """What the landing figure (`plots.verdict_chart`) draws: the verdicts of each claim's own statement that carry
    a figure (no context, nothing unmeasured), a row label for every judged claim, the region each one's bands call
    reproduced (or, for a hypothesis of the study's own, holds), and for a claim with no figure to mark, why."""
    rows = _own_statements(ledger)
    marked = rows[~rows["verdict"].isin([*_NO_VERDICT, Outcome.CONTEXT.value])]
    marked = marked[marked["ours"].notna() | marked["parts"].map(bool)]
    labels, bands, empty = {}, {}, {}
    for claim in claims if claims is not None else registry(judged_only=True):
        mine = marked[marked["claim"] == claim.number]
        name = claim.figure_words.format("").strip(" ,=") or claim.name.replace("_", " ")
        if mine["parts"].map(bool).any():
            name = f"{claim.part_words} (per part)" if claim.part_words else f"{name} (per part)"
        labels[claim.number] = f"{int(claim.number)}: {name}"
        if claim.bands:
            bands[claim.number] = claim.bands.span(
                Outcome.HOLDS if Outcome.HOLDS in claim.bands.outcomes else Outcome.REPRODUCED)
        gpu = rows[(rows["claim"] == claim.number) & rows["hardware"].str.startswith("cuda-")]
        if mine.empty:
            empty[claim.number] = _gpu_why(gpu)
        elif not (mine["evidence"] == GPU).any():
            labels[claim.number] += f"\n(GPU: {_gpu_why(gpu)})"
    return marked[marked["claim"].isin(labels)], labels, bands, empty


def chart_caption(labels: dict[str, str], bands: dict[str, tuple[float, float]], empty: dict[str, str],
                  rows: pd.DataFrame) -> str:
    """The landing figure's caption, true of every mark it draws: which rows are shaded, which mark parts, which
    have no mark and why."""
    parted = sorted({n for n, p in zip(rows["claim"], rows["parts"]) if p})
    text = ("Each claim's figure on one log scale, a row per claim: a filled circle for each GPU set measured here, an "
            "open square for each CPU set (a CPU analogue, never a reproduction), a grey triangle for each GPU others "
            "published on; a whisker is the interval the verdict decided on (a 95% interval, or for a row of "
            "{ref}`few timings <outcome-words>` a rough range). ")
    if bands:
        own = " (for claim 6, the study's own hypothesis: holds)" if "06" in bands else ""
        text += (f"The shaded region of claim(s) {', '.join(str(int(n)) for n in bands)} is what its rule calls "
                 f"reproduced{own}. ")
    unshaded = [n for n in labels if n not in bands and n not in empty]
    if unshaded:
        text += (f"Claim(s) {', '.join(str(int(n)) for n in unshaded)} decide on parts with thresholds of their own "
                 f"(each page states them), so their rows are not shaded. ")
    if parted:
        text += (f"Where a rule decides on parts (claim(s) {', '.join(str(int(n)) for n in parted)}), each part has a "
                 f"mark of its own, at its interval's middle. ")
    if empty:
        text += "A row without marks says why in it."
    return text.strip()


def published_label(hardware: str) -> str:
    """A published verdict's source and GPU with its citation: '`deepbench/V100` {cite:p}`deepbench`'."""
    keys = ", ".join(published.citation(source) for source in published_rules.sources_of(hardware))
    return f"`{hardware.removeprefix(PUBLISHED_PREFIX)}`{_cites(keys)}"


def to_markdown(ledger: pd.DataFrame) -> str:
    """The ledger as a MyST Markdown table, one row per claim and hardware set: claim pages linked with
    {doc} and sources cited with {cite:p}, so the book build checks every link and citation in it. What others
    published has a column of its own, never this study's hardware, verdict or figure columns."""
    lines = ["| claim and source | seed's figure | hardware set | verdict | our figure | published by others (not "
             "counted) |", "| --- | --- | --- | --- | --- | --- |"]
    previous = None
    for row in ledger.to_dict("records"):
        first = (row["claim"], row["rule"]) != previous  # a claim may judge more than one statement
        previous = (row["claim"], row["rule"])
        claim = (f"{_page_ref(row['claim'], row['page'])}: {_md(row['statement'])}. "
                 f"*Source: {_md(row['source'])}*{_cites(row['citations'])}") if first else ""
        seed = _md(row["seed figure"]) if first else ""
        if row["evidence"] == PUBLISHED:
            lines.append(f"| {claim} | {seed} |  |  |  | {published_label(row['hardware'])}: "
                         f"*{_md(row['verdict'])}*: {_md(row['our figure'])} |")
            continue
        hardware = f"`{row['hardware']}` ({row['evidence']})" if row["hardware"] else "none stored"
        # a set without a verdict for its noise says so in its figure already
        timed = row["timing"] and row["verdict"] != Outcome.NOT_ASSESSED.value
        ours = f"{row['our figure']}; {row['timing']}" if timed else row["our figure"]
        verdict = (f"{CPU_ANALOGUE}: {_md(row['verdict'])} (not counted)" if _is_analogue(row)
                   else f"**{_md(row['verdict'])}**")
        lines.append(f"| {claim} | {seed} | {hardware} | {verdict} | {_md(ours)} |  |")
    return "\n".join(lines)


def earlier_rules(ledger: pd.DataFrame) -> str:
    """The sets whose verdict a change of rule changed: each earlier version of a claim's rule under which a set read
    another outcome than it reads now (as the ledger printed it then), beside its verdict now, as a Markdown table
    (`rule_history`; each claim page lists every earlier version and every set)."""
    lines = ["| claim | hardware set | judged then by | verdict then | verdict now |", "| --- | --- | --- | --- | --- |"]
    own = ledger[(ledger.evidence != PUBLISHED) & (ledger.hardware != "")]
    for (number, hardware), rows in own.groupby(["claim", "hardware"], sort=True):
        now = rows.iloc[0]  # the claim's own statement comes first
        for then in rule_history.earlier_verdicts(number, [hardware]):
            if _outcome_word(then.verdict) == now["verdict"]:
                continue
            lines.append(f"| {_page_ref(number, now['page'])} | `{hardware}` | rule version {then.version + 1} of "
                         f"{len(rule_history.versions(number))} ({then.date}, {then.commit}) | "
                         f"{_md(_outcome_word(then.verdict))}: {_md(rule_history.headline(then.figure))} | "
                         f"{_md(now['verdict'])}: {_md(rule_history.headline(now['our figure']))} |")
    return "\n".join(lines) if len(lines) > 2 else "No stored set's verdict changed with a change of its rule."


def _outcome_word(printed: str) -> str:
    """The outcome in a verdict as the ledger printed it ('CPU analogue: partly (not counted)' -> 'partly')."""
    return printed.removeprefix(f"{CPU_ANALOGUE}: ").removesuffix(" (not counted)")


# --- the conclusions --------------------------------------------------------------------------------

def _is_analogue(row: dict) -> bool:
    return row["evidence"] == CPU_ANALOGUE and row["verdict"] not in _NO_VERDICT


def result_sets(ledger: pd.DataFrame) -> list[str]:
    """The hardware sets the verdicts rest on, each once (a pair's verdict, "cuda-x vs cpu-x", names two); what
    others published is not a result set of this study."""
    own = ledger[ledger["evidence"] != PUBLISHED]["hardware"]
    return sorted({name for label in own if label for name in str(label).split(" vs ")})


def counts(ledger: pd.DataFrame) -> dict[str, int]:
    """How many claims and verdicts the ledger holds, how many hardware sets of each kind, and the outcomes
    of the verdicts that count: those on GPU sets (a CPU set's verdict is a CPU analogue, counted apart). What
    others published is counted apart too (`published`, `published_sources`), never among this study's verdicts."""
    hardware = pd.Series(result_sets(ledger), dtype=str)
    others = ledger[ledger["evidence"] == PUBLISHED]
    ledger = ledger[ledger["evidence"] != PUBLISHED]
    measured = ledger[~ledger["verdict"].isin(_NO_VERDICT)]
    gpu = measured[measured["evidence"] == GPU]["verdict"].value_counts()
    return {"claims": int(ledger["claim"].nunique()), "verdicts": int(len(ledger)),
            "gpu_verdicts": int(gpu.sum()),
            "reproduced": int(gpu.get(Outcome.REPRODUCED.value, 0)),
            "exceeds": int(gpu.get(Outcome.EXCEEDS.value, 0)),
            "partly": int(gpu.get(Outcome.PARTLY.value, 0)),
            "not_reproduced": int(gpu.get(Outcome.NOT_REPRODUCED.value, 0)),
            "inconclusive": int(gpu.get(Outcome.INCONCLUSIVE.value, 0)),
            "holds": int(gpu.get(Outcome.HOLDS.value, 0)),
            "does_not_hold": int(gpu.get(Outcome.DOES_NOT_HOLD.value, 0)),
            "cpu_analogues": int((measured["evidence"] == CPU_ANALOGUE).sum()),
            "not_measured": int((ledger["verdict"] == Outcome.NOT_MEASURED.value).sum()),
            "not_assessed": int((ledger["verdict"] == Outcome.NOT_ASSESSED.value).sum()),
            "gpu_sets": int(hardware.str.startswith("cuda-").sum()),
            "cpu_sets": int(hardware.str.startswith("cpu-").sum()),
            "published": int(len(others)),
            "published_sources": len(_sources(others))}


def sentences(ledger: pd.DataFrame) -> list[str]:
    """One MyST Markdown paragraph per claim and statement judged, saying where it was reproduced, partly or
    not, from the verdicts."""
    out = []
    for (number, _), rows in ledger.groupby(["claim", "rule"], sort=False):
        others, rows = rows[rows["evidence"] == PUBLISHED], rows[rows["evidence"] != PUBLISHED]
        first = rows.iloc[0]
        head = (f"{_page_ref(number, first['page'])}: *{_md(first['statement'])}*. "
                f"The seed: {_md(first['seed figure'])}.")
        measured = rows[~rows["verdict"].isin(_NO_VERDICT)]
        unassessed = [h for h in rows.loc[rows["verdict"] == Outcome.NOT_ASSESSED.value, "hardware"] if h]
        if unassessed:
            head += (f" No verdict on {', '.join(f'`{h}`' for h in unassessed)}: timed in one burst per row, so "
                     f"its noise was not assessed.")
        if measured.empty:
            stored = [h for h in rows["hardware"] if h and h not in unassessed]
            where = f"the stored sets ({', '.join(f'`{h}`' for h in stored)})" if stored else "any stored hardware set"
            why = f" Not measurable on {where}:" if stored or not unassessed else ""
            out.append(f"{head}{why} neither confirmed nor refuted here.{_published(others)}")
            continue
        gpu, cpu = measured[measured["evidence"] == GPU], measured[measured["evidence"] == CPU_ANALOGUE]
        sentence = head
        if not gpu.empty:
            sentence += f" On GPUs: {_outcomes(gpu, bold=True)}."
        else:
            sentence += " **Its GPU claim is untested**: no GPU result set carries a verdict for it."
        if not cpu.empty:
            sentence += f" Its CPU analogue (not counted as a reproduction): {_outcomes(cpu, bold=False)}."
        unmeasurable = [h for h in rows.loc[rows["verdict"] == Outcome.NOT_MEASURED.value, "hardware"] if h]
        if unmeasurable:
            sentence += f" Not measurable on {', '.join(f'`{h}`' for h in unmeasurable)}."
        out.append(sentence + _published(others))
    return out


def _published(rows: pd.DataFrame) -> str:
    """' Published by others (not counted): 3 sources; reproduced by ..., context from ...' for one statement."""
    if rows.empty:
        return ""
    parts = []
    for outcome, phrase in [*((o, f"{p} on") for o, p in _PHRASES.items()),
                            (Outcome.CONTEXT.value, "context, no verdict, from")]:
        hits = rows[rows["verdict"] == outcome]
        if not hits.empty:
            parts.append(f"{phrase} {', '.join(published_label(h) for h in hits['hardware'])}")
    return (f" Published by others, on their GPUs (not counted as ours): {len(_sources(rows))} source(s); "
            f"{'; '.join(parts)}.")


def _sources(rows: pd.DataFrame) -> set[str]:
    """The published sources behind some published rows of the ledger, each once."""
    return {source for hardware in rows["hardware"] for source in published_rules.sources_of(hardware)}


def _outcomes(rows: pd.DataFrame, *, bold: bool) -> str:
    """'reproduced on `set` (figure); and partly reproduced on ...' for the verdicts in `rows`."""
    parts = []
    for outcome, phrase in _PHRASES.items():
        hits = rows[rows["verdict"] == outcome]
        if not hits.empty:
            where = "; ".join(f"`{h}` ({_md(ours)})" for h, ours in zip(hits["hardware"], hits["our figure"]))
            parts.append(f"{f'**{phrase}**' if bold else phrase} on {where}")
    return ", and ".join(parts)


def data_sources(ledger: pd.DataFrame) -> str:
    """Which result sets the verdicts rest on, in plain text (the landing page pastes it from the conclusions)."""
    sets = result_sets(ledger)
    gpus, cpus = [h for h in sets if h.startswith("cuda-")], [h for h in sets if h.startswith("cpu-")]
    listed = lambda names: f" ({', '.join(names)})" if names else ""  # noqa: E731
    return f"{len(gpus)} GPU result set(s){listed(gpus)} and {len(cpus)} CPU result set(s){listed(cpus)}"


def conclusions(ledger: pd.DataFrame) -> str:
    """The conclusions page's text, as MyST Markdown, computed from the ledger's verdicts."""
    n = counts(ledger)
    paragraphs = [f"**Where the data come from:** {_md(data_sources(ledger))}. Every seed's claim is about GPUs: a "
                  f"verdict on a CPU set tests its CPU analogue and is never counted as a reproduction."]
    if n["gpu_sets"] == 0:
        paragraphs.append("**No GPU result set is stored, so no claim about GPUs is tested here.** A reader with "
                          "an NVIDIA GPU can add one with `lstmstudy measure --device cuda` and "
                          "`lstmstudy reproduce --no-measure`, and this page is recomputed from it.")
    else:
        paragraphs.append(f"Of the {n['gpu_verdicts']} verdicts on GPU sets: {n['reproduced']} reproduced, "
                          f"{n['exceeds']} above the seed's range, {n['partly']} partly reproduced, "
                          f"{n['not_reproduced']} not reproduced and {n['inconclusive']} inconclusive; on the "
                          f"study's own hypotheses, which no seed makes and no count of reproductions includes: "
                          f"{n['holds']} hold, {n['does_not_hold']} do not.")
    paragraphs.append(f"The CPU sets give {n['cpu_analogues']} verdicts on CPU analogues; {n['not_measured']} "
                      f"verdicts could not be measured on the hardware at hand, and {n['not_assessed']} give no "
                      f"verdict because their set was timed in one burst per row, before interleaved rounds "
                      f"existed, so its run-to-run noise was not assessed.")
    if n["published"]:
        paragraphs.append(f"**What others published on GPUs:** {n['published_sources']} sources bear on the claims, in "
                          f"{n['published']} verdicts and context rows ({{doc}}`published`). They are judged by the "
                          f"same rules, cited, and never counted among this study's verdicts or reproductions.")
    bullets = "\n".join(f"- {s}" for s in sentences(ledger))
    return "\n\n".join(paragraphs + ([bullets] if bullets else []))
