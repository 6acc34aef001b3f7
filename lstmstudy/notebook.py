"""Helpers that keep the claim notebooks thin: parameter checks, the GPU note, glue of verdicts.

A parameter of the wrong type or value fails in the notebook's first cells with a message naming it,
before anything is measured or stored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from lstmstudy import hardware, plots, published_rules, rule_history
from lstmstudy.backends import study_process
from lstmstudy.claims import DEVICE_KINDS, Claim
from lstmstudy.errors import ParameterError
from lstmstudy.parameters import check_bool, check_positive_number
from lstmstudy.results import default_root as results_default_root
from lstmstudy.results import fingerprints, read_rows, set_path
from lstmstudy.rules import (CPU_ANALOGUE, GPU, PUBLISHED_PREFIX, RESTS_ON_HOST_BOUND, SIGN_RULE_ALPHA, Outcome,
                             Verdict, gpu_timing, one_burst_sets, why_not_measured)


def check_common(*, device: object, measure: object, quick: object, min_time: object,
                 results_dir: object) -> Path | None:
    """Check the parameters every claim notebook has and set the page up as the study's process
    (`backends.study_process`, the figures' theme); return the results root (None: the default)."""
    study_process()
    plots.use_theme()
    # a page's tables show every cell whole (a verdict's words run long) and numbers to three decimals
    pd.set_option("display.max_colwidth", None)
    pd.set_option("display.precision", 3)
    check_bool(measure=measure, quick=quick)
    check_positive_number(min_time=min_time)
    if not isinstance(device, str):
        raise ParameterError(f"parameter 'device' must be a string such as 'auto', 'cpu' or 'cuda', got {device!r}")
    if measure:
        try:
            hardware.resolve_device(device)
        except Exception as exc:
            raise ParameterError(f"parameter 'device': {exc}") from None
    if results_dir is not None and not isinstance(results_dir, str):
        raise ParameterError(f"parameter 'results_dir' must be a path string or None, got {results_dir!r}")
    return Path(results_dir) if results_dir else None


def grid_table(claim: Claim, overrides: object) -> pd.DataFrame:
    """The grid each device kind measures: the claim's defaults with the notebook's `grid` overrides,
    checked here, before anything is measured, and the number of points it makes."""
    if not isinstance(overrides, dict):
        raise ParameterError(f"parameter 'grid' must be a dict of grid parameters, got {overrides!r}")
    columns = {}
    for kind in DEVICE_KINDS:
        parameters = claim.parameters(kind, **overrides)
        columns[kind] = {**{name: str(value) for name, value in parameters.items()},
                         "points": str(len(claim.points(kind, **overrides)))}
    return pd.DataFrame(columns).rename_axis(f"default grid of {claim.stem}")


def hardware_sets(results: pd.DataFrame, claim: str | None = None, root: Path | None = None) -> pd.DataFrame:
    """Which hardware sets are stored, with how many configurations each, what their verdicts can be (`evidence`),
    how they were timed (of a GPU set, what its rows timed: `rules.gpu_timing`), and, given the claim's name, the
    commits they were measured at: a set measured from a tree with uncommitted changes says so, since no commit holds
    the code that measured it."""
    columns = ["hardware_id", "evidence", "configurations", "timing", "measured at", "speed", "runs"]
    if results.empty:
        return pd.DataFrame(columns=columns)
    bursts = one_burst_sets(results)
    stored = fingerprints(claim, root) if claim else {}
    rows = []
    for hardware_id, part in results.groupby("hardware_id", sort=True):
        timed = (part.status == "ok").any()
        evidence = GPU if hardware_id.startswith("cuda-") else CPU_ANALOGUE
        timing = ("nothing timed" if not timed else "one burst per row: noise not assessed, no verdict"
                  if hardware_id in bursts else f"interleaved rounds, {_processes_text(part)}")
        timing = "; ".join(filter(None, [timing, gpu_timing(part)]))
        rows.append({"hardware_id": hardware_id, "evidence": evidence if timed else "not measured",
                     "configurations": len(part), "timing": timing,
                     "measured at": _provenance(part, stored.get(hardware_id, [])),
                     "speed": _speed(part, stored.get(hardware_id, [])),
                     "runs": _machines(claim, hardware_id, root, stored.get(hardware_id, [])) if claim else ""})
    return pd.DataFrame(rows, columns=columns)


def _processes_text(rows: pd.DataFrame) -> str:
    """How many worker processes a set's timed rows come from (`sweep.run`): one process's intervals lack the
    noise between processes, and a reader should know which sets that is."""
    counts = sorted({max(1, len(sizes)) for sizes in rows.loc[rows.status == "ok", "process_rounds"]})
    if counts == [1]:
        return "one process (the intervals hold no noise between processes)"
    return f"{counts[0]} worker processes" if len(counts) == 1 else f"{counts[0]} to {counts[-1]} worker processes"


def _runs(rows: pd.DataFrame, stored: list[dict]) -> list[dict]:
    """The stored fingerprints of the runs that measured `rows` (each row names its run's `fingerprint_id`)."""
    used = set(rows["fingerprint_id"].dropna()) if "fingerprint_id" in rows else set()
    return [fp for fp in stored if fp["id"] in used]


def _speed(rows: pd.DataFrame, stored: list[dict]) -> str:
    """The speed calibrations (`hardware.calibrate`) of the runs a set's rows come from: the runs a figure rests on,
    and whether they ran at one speed (a sweep refuses to mix speeds further apart than its tolerance)."""
    found = sorted(fp["calibration_s"] * 1e3 for fp in _runs(rows, stored) if fp.get("calibration_s"))
    if not found:
        return "not recorded (measured before runs were calibrated)"
    spread = f"{found[0]:.3g} ms" if len(found) == 1 else f"{found[0]:.3g}-{found[-1]:.3g} ms"
    return f"{len(found)} run(s), fp32 GEMM in {spread}"


def _machines(claim: str, hardware_id: str, root: Path | None, stored: list[dict]) -> str:
    """Every run whose rows a set's file holds, the superseded and other workers' included: its machine (the
    fingerprint's host tag and runtime), the days of its rows, how many and its speed. One id can name two
    machines of one kind, and rows of both would otherwise sit in one set unseen."""
    rows = pd.DataFrame(read_rows(set_path(claim, hardware_id, root)))
    if rows.empty:
        return "no rows"
    known = {fp["id"]: fp for fp in stored}

    def run(row: pd.Series) -> str:
        fp = known.get(row.fingerprint_id, {})
        machine = f"host {fp.get('host') or 'not recorded'}" + (f" ({fp['runtime']})" if fp.get("runtime") else "")
        speed = f"fp32 GEMM in {fp['calibration_s'] * 1e3:.3g} ms" if fp.get("calibration_s") else "speed not recorded"
        return f"{machine}, {row.created_at[:10]}, {speed}"

    runs = rows.assign(run=rows.apply(run, axis=1)).groupby("run", sort=False)
    return f"{runs.ngroups} run(s): " + "; ".join(
        f"{text}: {len(part)} rows" + (f" from {part.process.nunique()} processes" if part.process.nunique() > 1 else "")
        for text, part in runs)


def _provenance(rows: pd.DataFrame, stored: list[dict]) -> str:
    """The commits a set's rows were measured at, '(uncommitted changes)' after each measured from a dirty tree."""
    found = _runs(rows, stored) or stored
    commits = sorted({(str(fp.get("git_commit") or "not recorded"), bool(fp.get("git_dirty"))) for fp in found})
    return ", ".join(f"{commit}{' (uncommitted changes)' if dirty else ''}" for commit, dirty in commits) \
        or "not recorded"


def shown(table: pd.DataFrame, empty: str, missing: Mapping[str, str] | None = None,
          default: str = "not measured") -> object:
    """A table as a page shows it: one line saying why when it has no rows (never headers without rows), and
    words where a cell has no value (`missing[column]`, else `default`), never a raw NaN."""
    from IPython.display import Markdown

    if table.empty:
        return Markdown(empty)
    out = table.astype(object)
    for column in out.columns:
        out[column] = out[column].where(table[column].notna(), (missing or {}).get(column, default))
    return out


def gpu_note(results: pd.DataFrame, claim: str, what: str = "The GPU side of this claim") -> str:
    """Markdown saying honestly whether a GPU result set is stored, and how to add one."""
    gpus = sorted(results.loc[results.device_kind == "cuda", "hardware_id"].unique()) if not results.empty else []
    if gpus:
        return f"GPU result sets stored for this page: {', '.join(f'`{g}`' for g in gpus)}."
    return (f"**{what} was not measured: no GPU result set is stored yet.** The figures below come from "
            f"CPU hardware only. On a machine with an NVIDIA GPU, add one with "
            f"`lstmstudy measure --device cuda --claims {claim}` (then `lstmstudy reproduce --no-measure`); the "
            f"page then compares it with every other stored set.")


def verdict_table(verdicts: Sequence[Verdict]) -> pd.DataFrame:
    """The verdicts as the page shows them, the deciding columns first: the outcome, what it tests (`GPU`, `CPU
    analogue`, or `not measured`), every interval the rule decided on (a 95% interval unless it says otherwise) and
    our figure. The seed's figure, the claim
    and the rule are in the page's box, once."""
    return pd.DataFrame([{"hardware": v.hardware_id, "verdict": _outcome_words(v), "evidence": v.evidence_label,
                          "interval": _interval_cell(v), "ours": v.ours_text} for v in verdicts])


def _outcome_words(verdict: Verdict) -> str:
    """A verdict's outcome as a page shows it, saying so where it rests on host-bound rows (`Verdict.host_bound`)."""
    return f"{verdict.outcome.value} ({RESTS_ON_HOST_BOUND})" if verdict.host_bound else verdict.outcome.value


def _interval_cell(verdict: Verdict) -> str:
    """A verdict's intervals in a table cell: named where they are no 95% interval, a dash where there is none."""
    if verdict.interval_text == "none":
        return "–"
    if verdict.interval_name == "95% interval":
        return verdict.interval_text
    return f"{verdict.interval_name}: {verdict.interval_text}"


def verdict_glue(prefix: str, verdicts: Sequence[Verdict]) -> dict[str, str]:
    """What `glue_verdicts` glues: per device kind (`{prefix}_cpu`, `{prefix}_cuda`), every stored set's figure
    and outcome, one sentence each ('On cpu-a (CPU analogue): 2.5x ...: reproduced.'), or what is missing.

    A test recomputes it from the committed results and compares it with each rendered page, so a page is
    never stale.
    """
    out = {}
    for kind, missing in (("cpu", "No CPU result set is stored."),
                          ("cuda", "Not measured on a GPU: no GPU result set is stored yet.")):
        mine = [v for v in verdicts if v.hardware_id.startswith(kind + "-")]
        out[f"{prefix}_{kind}"] = " ".join(_sentence(v) for v in mine) or missing
    return out


def _sentence(verdict: Verdict) -> str:
    """One set's verdict in a sentence; a set without a verdict has a text that says why, and no outcome after it."""
    text = verdict.ours_text.rstrip(".")
    if verdict.outcome in (Outcome.NOT_MEASURED, Outcome.NOT_ASSESSED):
        return f"On {verdict.hardware_id}: {text}."
    return f"On {verdict.hardware_id} ({verdict.evidence_label}): {text}: {_outcome_words(verdict)}."


def glue_verdicts(prefix: str, verdicts: Sequence[Verdict]) -> None:
    """Glue `verdict_glue(prefix, verdicts)` into the page's prose."""
    from myst_nb import glue

    for key, value in verdict_glue(prefix, verdicts).items():
        glue(key, value, display=False)


def glance(claim: Claim, results: pd.DataFrame, verdicts: Sequence[Verdict], root: Path | None = None) -> str:
    """The box a claim page opens with, as MyST Markdown, in the order a reader decides: what the source says (its
    figure, verbatim); the GPU result first (the headline figure with its unit, the interval, the verdict, and how
    sure it is, a sentence); the CPU analogues in one line; where the words are defined. What was measured on
    which set is in `hardware_sets`, which each page folds."""
    own = [v for v in verdicts if v.rule == claim.rule] or list(verdicts)
    sets = hardware_sets(results, claim.name, root)
    measured = "; ".join(f"`{r.hardware_id}` ({_set_label(r.hardware_id, r.evidence, own)}, {r.configurations} "
                         f"configurations, {r.timing}"
                         f"{', measured with uncommitted changes' if 'uncommitted' in r['measured at'] else ''})"
                         for _, r in sets.iterrows()) or "nothing stored yet"
    gpu_sets = sets[sets.hardware_id.str.startswith("cuda-")]
    if gpu_sets.empty:
        measured += ". **No GPU set is stored: the claim itself, about GPUs, is not measured here**"
    elif not (gpu_sets.evidence == GPU).any():
        measured += (f". **{len(gpu_sets)} GPU set(s) stored, none of which could time this claim: the claim itself, "
                     f"about GPUs, is not measured here** (each set's rows say why)")
    gpus = [v for v in own if v.evidence == GPU]
    cpus = [v for v in own if v.evidence != GPU]
    lines = [f"**What the source says:** {claim.seed_figure}.", ""]
    if gpus:
        lines += [f"**On the GPU** ({_gpu_words(claim, v)}" for v in gpus]
    else:
        lines.append(f"**On a GPU: not measured.** No GPU result set is stored for this claim; on a machine with an "
                     f"NVIDIA GPU, `lstmstudy measure --device cuda --claims {claim.number}` adds one.")
    lines.append("")
    if cpus:
        lines.append("**On CPUs** (each a *CPU analogue*, never counted as a reproduction): "
                     + "; ".join(_cpu_words(claim, group) for group in _by_outcome(cpus)) + ".")
    else:
        lines.append("**On CPUs:** no CPU result set is stored.")
    if claim.figure_meaning:
        lines += ["", claim.figure_meaning]
    lines += ["", "Each outcome word is defined in {ref}`the glossary <outcome-words>`; the rule that decides is in "
              "the dropdown below."]
    lines += ["", "::::{dropdown} What was measured, on which hardware sets", f"{measured}.", ""]
    if claim.analogue:
        lines.append(f"**What the CPU analogue measures**, and what it cannot show: {claim.analogue}.")
    lines.append("::::")
    return "\n".join(lines)


def how_sure(verdict: Verdict) -> str:
    """How far a verdict can be trusted (`_how_sure`), and where it rests on host-bound rows (`Verdict.host_bound`),
    one more sentence saying so: its figure is then partly the host's, whatever the claim says of the GPU."""
    sure = _how_sure(verdict)
    return f"{sure} It {RESTS_ON_HOST_BOUND}." if verdict.host_bound else sure


def _how_sure(verdict: Verdict) -> str:
    """One sentence on how far a verdict can be trusted, from what decided it."""
    if verdict.outcome == Outcome.NOT_ASSESSED:
        return "Each row was timed in one burst, so its interval holds no run-to-run drift: no verdict."
    if verdict.fewest_timings:
        return (f"It rests on a row of {verdict.fewest_timings} timings, too few for a 95% interval: "
                + ("too few, or too scattered, to decide." if verdict.outcome == Outcome.INCONCLUSIVE else
                   f"its rounds all agree, which decides it by the rule for few timings (chance <= "
                   f"{SIGN_RULE_ALPHA:.0%})."))
    if verdict.outcome == Outcome.INCONCLUSIVE:
        return "The interval straddles a threshold of the rule: a second run could land on either side."
    if verdict.low is None and not verdict.parts:
        return "A point figure without an interval: read it as one run's."
    return ("Each interval lies wholly in one region of the rule: a second run lands inside a 95% interval 95% of "
            "the time." if verdict.parts else
            "The whole 95% interval lies in one region of the rule: a second run lands inside it 95% of the time.")


def _gpu_words(claim: Claim, verdict: Verdict) -> str:
    """The rest of a GPU verdict's line in the box, after 'On the GPU ('."""
    name = f"`{verdict.hardware_id}`"
    if verdict.outcome == Outcome.NOT_MEASURED:
        return f"{name}): {_not_measured(verdict.ours_text)}."
    figure = claim.headline(verdict)
    return f"{name}): {figure + ': ' if figure else ''}**{verdict.outcome.value}**. {how_sure(verdict)}"


def _by_outcome(verdicts: Sequence[Verdict]) -> list[list[Verdict]]:
    """Verdicts grouped by outcome, in the order each outcome first appears."""
    groups: dict[str, list[Verdict]] = {}
    for verdict in verdicts:
        groups.setdefault(verdict.outcome.value, []).append(verdict)
    return list(groups.values())


def _cpu_words(claim: Claim, verdicts: Sequence[Verdict]) -> str:
    """CPU sets of one outcome in a few words for the box's one line: '*partly* on `cpu-a` (1.86x), `cpu-b` (1.5x)'."""
    sets = ", ".join(f"`{v.hardware_id}`" + (f" ({v.ours:.3g}{claim.unit})" if v.ours is not None else "")
                     for v in verdicts)
    outcome = verdicts[0].outcome
    return f"not measured on {sets}" if outcome == Outcome.NOT_MEASURED else f"*{outcome.value}* on {sets}"


def _not_measured(text: str) -> str:
    """Why a GPU set could not decide a claim (`why_not_measured`), under the outcome's name unless the words begin
    with it."""
    why = why_not_measured(text)
    return f"**{why}**" if why.startswith("not measured") else f"**{Outcome.NOT_MEASURED.value}** ({why})"


def downloads(claim: str, root: Path | None = None) -> str:
    """The raw data behind a page as MyST: a download link per stored set's rows (CSV, every raw sample) and its
    fingerprints (JSON). A results folder outside the book's tree cannot be served by it: its path is named instead."""
    from lstmstudy.paths import study_root

    study = study_root().resolve()
    page_dir = study / "book" / "claims"
    folder = Path(root or results_default_root()) / claim
    lines = []
    for csv in sorted(folder.glob("*.csv")):
        links = []
        for path, what in ((csv, "rows, every raw sample (CSV)"), (csv.with_suffix(".json"), "fingerprints (JSON)")):
            if not path.exists():
                continue
            where = path.resolve()
            links.append(f"{{download}}`{what} <{Path(os.path.relpath(where, page_dir)).as_posix()}>`"
                         if where.is_relative_to(study) else f"{what}: `{path}`")
        lines.append(f"- `{csv.stem}`: " + ", ".join(links))
    return "\n".join(lines) or "No result set is stored for this claim."


def _set_label(hardware_id: str, evidence: str, verdicts: Sequence[Verdict]) -> str:
    """What a stored set is to the claim: its verdict's evidence ('not measured' where the claim could not be
    measured on it, whatever rows it holds), the verdict it is paired in (a GPU host's CPU), else its kind."""
    for verdict in verdicts:
        if verdict.hardware_id == hardware_id:
            return verdict.evidence_label
    for verdict in verdicts:
        if hardware_id in verdict.hardware_id.split(" vs "):
            return f"paired in the {verdict.evidence_label} verdict `{verdict.hardware_id}`"
    return evidence


def rule_glue(claim: Claim, verdicts: Sequence[Verdict]) -> dict[str, str]:
    """The rule a page states, the code's own text (`c{number}_rule`), and its history as MyST (`c{number}_rule_history`):
    every version, and what each stored set read under an earlier one beside what it reads now (`rule_history`)."""
    own = [v for v in verdicts if v.rule == claim.rule]
    versions = rule_history.history_table(claim.number)
    earlier = rule_history.earlier_table(claim.number, own)
    if len(versions) <= 1:
        history = "This rule has not changed since the book first stated it."
    else:
        history = (f"The rule above is version {len(versions)}; the book stated {len(versions) - 1} earlier "
                   f"version(s) (`lstmstudy/rule_history.json`):\n\n{_markdown(versions)}\n\n")
        history += (f"What each stored set read under an earlier version, as the ledger last printed it then, beside "
                    f"its verdict now:\n\n{_markdown(earlier)}" if not earlier.empty else
                    "No stored set was judged under an earlier version.")
    return {f"c{claim.number}_rule": claim.rule, f"c{claim.number}_rule_history": history}


def _markdown(table: pd.DataFrame) -> str:
    """A small table as Markdown, its cells' pipes escaped."""
    return table.astype(str).replace({r"\|": r"\\|"}, regex=True).to_markdown(index=False)


def judge(claim: Claim, results: pd.DataFrame, root: Path | None = None) -> list[Verdict]:
    """A claim page's verdicts (`Claim.judge`), glued for its prose (`glue_verdicts`), its opening box
    (`{prefix}_glance`, from `glance`) and its rule with the rule's history (`rule_glue`)."""
    from IPython.display import Markdown
    from myst_nb import glue

    verdicts = claim.judge(results)
    prefix = f"c{claim.number}"
    glue_verdicts(prefix, [v for v in verdicts if v.rule == claim.rule])
    glue(f"{prefix}_glance", Markdown(glance(claim, results, verdicts, root)), display=False)
    for key, value in rule_glue(claim, verdicts).items():
        glue(key, Markdown(value) if key.endswith("_history") else value, display=False)
    return verdicts


def published_glue(number: str, found: Sequence[Verdict] | None = None) -> dict[str, str]:
    """What `glue_published` glues for a claim page: how many published verdicts and context rows bear on the
    claim (`c{number}_published_count`) and each one's source, GPU and outcome (`c{number}_published`);
    `found`: the claim's `published_rules.verdicts(number)`, where the caller has them already."""
    found = published_rules.verdicts(number) if found is None else found
    listed = "; ".join(f"{v.hardware_id.removeprefix(PUBLISHED_PREFIX)}: {v.outcome.value}" for v in found)
    return {f"c{number}_published_count": str(len(found)), f"c{number}_published": listed or "none"}


def glue_published(number: str) -> pd.DataFrame:
    """Glue `published_glue(number)` into the page's prose and return the published table the page shows."""
    from myst_nb import glue

    found = published_rules.verdicts(number)  # once: each bootstraps Woolf's epochs
    for key, value in published_glue(number, found).items():
        glue(key, value, display=False)
    return published_rules.table(number, found)
