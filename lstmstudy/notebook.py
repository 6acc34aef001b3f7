"""Helpers that keep the claim notebooks thin: parameter checks, the GPU note, glue of verdicts.

A parameter of the wrong type or value fails in the notebook's first cells with a message naming it,
before anything is measured or stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from lstmstudy import hardware, published_rules
from lstmstudy.claims import DEVICE_KINDS, PUBLISHED_PREFIX, Claim, Outcome, Verdict
from lstmstudy.errors import ParameterError
from lstmstudy.parameters import check_bool, check_positive_number


def check_common(*, device: object, measure: object, quick: object, min_time: object,
                 results_dir: object) -> Path | None:
    """Check the parameters every claim notebook has; return the results root (None: the default)."""
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


def hardware_sets(results: pd.DataFrame) -> pd.DataFrame:
    """Which hardware sets are stored, with how many configurations each."""
    if results.empty:
        return pd.DataFrame(columns=["hardware_id", "device_kind", "configurations"])
    return (results.groupby(["hardware_id", "device_kind"]).size().rename("configurations").reset_index())


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
    """The verdicts as the page shows them: what each tests (`GPU` or `CPU analogue`) and every interval the rule
    decided on, where it decides on intervals."""
    return pd.DataFrame([{"hardware": v.hardware_id, "evidence": v.evidence, "statement": v.statement,
                          "seed": v.seed_figure, "ours": v.ours_text,
                          "95% interval": v.interval_text,
                          "verdict": v.outcome.value, "rule": v.rule} for v in verdicts])


def verdict_glue(prefix: str, verdicts: Sequence[Verdict]) -> dict[str, str]:
    """What `glue_verdicts` glues: per device kind (`cpu`, `cuda`), the first stored set's figure and outcome.

    Keys: `{prefix}_{kind}_ours`, `{prefix}_{kind}_verdict`, `{prefix}_{kind}_hardware`; a kind with no
    stored set gets "not measured on this hardware". A test recomputes it from the committed results and
    compares it with each rendered page, so a page is never stale.
    """
    out = {}
    for kind in ("cpu", "cuda"):
        found = next((v for v in verdicts
                      if v.hardware_id.startswith(kind + "-") and v.outcome != Outcome.NOT_MEASURED), None)
        out[f"{prefix}_{kind}_ours"] = found.ours_text if found else "not measured"
        out[f"{prefix}_{kind}_verdict"] = found.outcome.value if found else Outcome.NOT_MEASURED.value
        out[f"{prefix}_{kind}_hardware"] = found.hardware_id if found else "no stored set"
    return out


def glue_verdicts(prefix: str, verdicts: Sequence[Verdict]) -> None:
    """Glue `verdict_glue(prefix, verdicts)` into the page's prose."""
    from myst_nb import glue

    for key, value in verdict_glue(prefix, verdicts).items():
        glue(key, value, display=False)


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
