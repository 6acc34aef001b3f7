"""What others published, judged by the claims' own rules: a kind of evidence of its own, shown beside this
study's and never counted as it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from lstmstudy import ledger, notebook, published, published_rules
from lstmstudy.claims import cudnn_fallback as c01
from lstmstudy.claims import lookup
from lstmstudy.claims import mixed_precision as c03
from lstmstudy.rules import PUBLISHED, Outcome

CLAIMS_WITH_PUBLISHED = ("01", "02", "03", "04", "07")
ROOT = Path(__file__).resolve().parent.parent

#: a figure given as a 95% interval ("95% interval 6.63-7.74", "95% CI 1.8-2.6"), which a published point is not
CALLED_AN_INTERVAL = re.compile(r"95% (interval|CI)s? \(?\d")


@pytest.mark.parametrize("number", CLAIMS_WITH_PUBLISHED)
def test_a_published_verdict_is_its_own_kind_and_never_counts(number):
    found = published_rules.verdicts(number)
    assert found
    for verdict in found:
        assert verdict.evidence == PUBLISHED and not verdict.counts
        for source in published_rules.sources_of(verdict.hardware_id):
            assert published.citation(source)  # every source is cited from references.bib


def test_claims_without_published_data_have_none():
    assert published_rules.verdicts("05") == published_rules.verdicts("06") == []


def test_deepbench_v100_keeps_its_hand_read_figures_as_context_for_claim_3():
    """The V100's smallest shape (hidden 512, batch 16, 25 steps) read off the workbook by hand: forward 1.095 ms
    in FP32 and 0.441 ms in mixed precision, 2.48x on inference; the training total (2.197 and 1.411 ms: 1.56x)
    beside it. The sheet feeds FP16 inputs to the Tensor Cores, with no cast anywhere: it cannot show the casts'
    cost of part (i), so the claim's rule does not decide on it."""
    v100 = next(v for v in published_rules.verdicts("03") if v.hardware_id == "published:deepbench/V100")
    small, small_train = 1.095 / 0.441, 2.197 / 1.411
    assert f"{small:.2f}x at the smallest shape (H=512 T=25 B=16)" in v100.ours_text
    assert f"training (the sheet's total), beside it: {small_train:.2f}x" in v100.ours_text
    assert v100.ours > c03.LARGE_MIN and v100.low is None and "point only" in v100.ours_text
    assert v100.outcome == Outcome.CONTEXT and "no cast anywhere" in v100.ours_text
    assert "part (i) fails" not in v100.ours_text and "part (ii) holds" not in v100.ours_text


def test_claim_3_published_evidence_without_the_claims_mechanism_is_context_with_its_reason_in_one_line():
    """No published source measured the casts at small sizes beside the 16-bit math at large ones: DeepBench's sheets
    and the P100 thread take 16-bit inputs (no casts; the P100s have no Tensor Cores), GNMT casts on one large model.
    Each keeps its figure and says in one line what it measured and what it lacks."""
    found = {v.hardware_id.removeprefix("published:"): v for v in published_rules.verdicts("03")}
    assert {"deepbench/V100", "deepbench/P100", "pytorch-1539/P100"} <= set(found)
    assert any(key.startswith("gnmt-") for key in found)
    for key, verdict in found.items():
        assert verdict.outcome == Outcome.CONTEXT, key
        assert verdict.ours is not None and verdict.ours_text.count("context only: it measured ") == 1, key
        assert "\n" not in verdict.ours_text and "part (i) fails" not in verdict.ours_text, key
    assert "32-bit math" in found["deepbench/P100"].ours_text.split("context only:")[1]
    assert "casts included" in next(v for k, v in found.items() if k.startswith("gnmt-")).ours_text


def test_the_v100_range_is_one_figure_the_verdict_and_the_page_share():
    """DeepBench's V100 speed-up over its shapes: the forward calls (1.12-4.69x) are the figure; the training totals
    (1.07-5.22x) a separate one, named so; never the two pooled (1.07-5.22x read as one range)."""
    speedups = published_rules.deepbench_speedups()
    glued = published_rules.deepbench_glue(speedups)
    assert glued == {"published_v100_inference_range": "1.12-4.69x", "published_v100_train_range": "1.07-5.22x",
                     "published_p100_inference_range": "0.45-1.42x"}
    v100 = next(v for v in published_rules.verdicts("03") if v.hardware_id == "published:deepbench/V100")
    assert "range over its 22 shapes 1.12-4.69x" in v100.ours_text and "range 1.07-5.22x" in v100.ours_text


def test_the_published_page_glues_the_ranges_it_prints_and_computes_none():
    page = json.loads((ROOT / "book" / "published.ipynb").read_text(encoding="utf-8"))
    prose = "".join("".join(c["source"]) for c in page["cells"] if c["cell_type"] == "markdown")
    code = "".join("".join(c["source"]) for c in page["cells"] if c["cell_type"] == "code")
    keys = set(re.findall(r"\{glue:text\}`(published_[a-z0-9_]+)`", prose))
    assert keys == set(published_rules.deepbench_glue(published_rules.deepbench_speedups()))
    assert "published_rules.deepbench_glue(" in code and "speedup.min()" not in code and "speedup.max()" not in code


def test_the_p100_pseudo_fp16_sheet_is_judged_on_its_forward_calls_only():
    speedups = published_rules.deepbench_speedups()
    assert set(speedups[speedups.card == "P100"].phase) == {"inference"}
    assert set(speedups[speedups.card == "V100"].phase) == {"inference", "train"}
    assert len(speedups[(speedups.card == "V100") & (speedups.phase == "train")]) == 22


def test_woolf_fallback_is_a_point_shown_with_its_epochs_and_names_the_version_change():
    """Three epochs per run form no 95% interval: the ratio of medians is judged as a point, the epochs are shown,
    and their pairwise ratios (283.6-329.1 s over 42.5-42.8 s: 6.63-7.74x) are called a range."""
    row = published_rules.woolf_fallback().iloc[0]
    assert [len(row.generic_epochs_s), len(row.cudnn_epochs_s)] == [3, 3] < [published_rules.MIN_REPEATS] * 2
    assert row.pairwise_min < row.slowdown < row.pairwise_max
    assert (round(row.pairwise_min, 2), round(row.pairwise_max, 2)) == (6.63, 7.74)
    verdict = published_rules.verdicts("01")[0]
    assert verdict.outcome == c01.BANDS.decide(row.slowdown, row.slowdown) and verdict.low is verdict.high is None
    assert not CALLED_AN_INTERVAL.search(verdict.ours_text) and "pairwise ratios range 6.63-7.74x" in verdict.ours_text
    assert "generic 283.6, 293.3, 329.1 s" in verdict.ours_text
    assert "point only: 3 epochs per run, too few (under 5) to form a 95% interval" in verdict.ours_text
    assert "two TensorFlow versions" in verdict.ours_text


def test_no_published_figure_is_called_a_95_percent_interval():
    """No published source repeats its measurement the `MIN_REPEATS` times a 95% interval needs (Woolf's runs have
    3 epochs after the first): every published verdict is a point, says so, and names no 95% interval."""
    assert published_rules.woolf_runs().epochs_s.map(len).max() < published_rules.MIN_REPEATS
    for number in CLAIMS_WITH_PUBLISHED:
        for verdict in published_rules.verdicts(number):
            assert verdict.low is None and verdict.high is None, verdict.hardware_id
            assert "point only" in verdict.ours_text, verdict.hardware_id
            assert not CALLED_AN_INTERVAL.search(verdict.ours_text), verdict.hardware_id
        assert set(published_rules.table(number)["95% interval"]) == {"none (point only)"}


def test_an_issue_thread_figure_is_quoted_and_judged_on_its_point():
    thread = next(v for v in published_rules.verdicts("01") if v.hardware_id.startswith("published:keras-8135/"))
    assert thread.ours == 7.8 and '"factor of 7.8"' in thread.ours_text
    assert thread.outcome == c01.BANDS.decide(7.8, 7.8) and thread.low is None and "point only" in thread.ours_text


def test_one_batch_size_cannot_test_the_crossover():
    table = published_rules.woolf_cpu_vs_gpu()
    assert set(table.batch) == {32}
    generic = table[table.lstm_kernel == "generic"]
    assert (generic.faster == "CPU").all() and (table[table.lstm_kernel == "cudnn"].faster == "GPU").all()
    assert ((table.gpu_over_cpu > 1) == (table.faster == "CPU")).all()  # the side on the point, not an interval
    for verdict in published_rules.verdicts("02"):
        assert verdict.outcome == Outcome.CONTEXT and "crossover" in verdict.ours_text


def test_woolf_cpu_vs_gpu_rows_say_once_what_their_numbers_are():
    """The K80's generic LSTM against 8 CPU runs: ratios of medians 1.88-2.30, their epochs' pairwise ratios 1.80-2.59
    (once printed as "95% CIs" beside an interval column reading "none (point only)")."""
    k80 = next(v for v in published_rules.verdicts("02") if v.hardware_id == "published:woolf-2017-07/K80 generic")
    assert "median epoch GPU/CPU 1.88-2.30 (their epochs' pairwise ratios range 1.80-2.59)" in k80.ours_text
    assert "point only: 3 epochs per run" in k80.ours_text and not CALLED_AN_INTERVAL.search(k80.ours_text)


@pytest.mark.parametrize("number", ("04", "07"))
def test_no_framework_or_model_parallel_figure_means_no_verdict(number):
    assert {v.outcome for v in published_rules.verdicts(number)} == {Outcome.CONTEXT}


def test_the_cited_figures_are_verbatim_rows_of_their_quotes():
    for entry in published.cited().values():
        quoted = "\n".join(q["text"] for q in entry["quotes"])
        for row in entry.get("rows", []):
            assert row["printed_row"] in quoted
            assert all(cell in row["printed_row"] for cell in row["printed_cells"])
        for figure in entry.get("figures", []):
            assert figure["printed"].removeprefix("<td>").removesuffix("</td>") in quoted


def test_the_gnmt_table_keeps_the_printed_speedups():
    gnmt = published.gnmt_training()
    tf_a100 = gnmt[(gnmt.framework == "tensorflow") & (gnmt.gpu == "A100 40GB") & (gnmt.gpus == 1)].iloc[0]
    assert (tf_a100.speedup_printed, tf_a100.baseline) == (0.96, "TF32")
    assert tf_a100.mixed_tok_s / tf_a100.baseline_tok_s == pytest.approx(0.96, abs=0.005)


@pytest.mark.parametrize(("claim", "kernel", "phase", "precisions"),
                         [("03", "torch.fused", "train", {"fp32", "fp16"}), ("04", "torch.raw", "inference", {"fp32"})])
def test_the_gpu_grids_hold_every_deepbench_shape(claim, kernel, phase, precisions):
    shapes = set(published.deepbench_shapes())
    assert len(shapes) == 22
    for kind, expected in (("cuda", shapes), ("cpu", set())):
        points = [p for p in lookup([claim])[0].points(kind) if p.kernel == kernel and p.phase == phase
                  and p.shape.features == p.shape.hidden]
        found = {(p.shape.hidden, p.shape.batch, p.shape.timesteps) for p in points if p.precision in precisions}
        assert shapes & found == expected, kind


def test_a_gpu_row_at_a_deepbench_shape_lands_beside_the_v100():
    row = {"hardware_id": "cuda-h100", "status": "ok", "kernel": "torch.fused", "phase": "train",
           "precision": "fp16", "hidden": 512, "batch": 16, "timesteps": 25, "features": 512,
           "median_s": 0.0007055, "ci_low_s": 0.0007, "ci_high_s": 0.00071}
    cpu = {**row, "hardware_id": "cpu-x"}
    beside = published_rules.beside_deepbench(pd.DataFrame([row, cpu]), "torch.fused", "train")
    assert len(beside) == 1 and beside.v100_ms.iloc[0] == 1.411  # the V100's mixed-precision total
    assert beside.ours_over_v100.iloc[0] == pytest.approx(0.5)
    assert published_rules.beside_deepbench(pd.DataFrame(), "torch.fused", "train").empty


def test_the_ledger_shows_published_rows_in_a_column_of_their_own_and_counts_them_apart(ledger_table):
    others = ledger_table[ledger_table.evidence == PUBLISHED]
    assert set(others.claim) == set(CLAIMS_WITH_PUBLISHED)
    own = ledger_table[ledger_table.evidence != PUBLISHED]
    with_them, without = ledger.counts(ledger_table), ledger.counts(own)
    assert {k: v for k, v in with_them.items() if not k.startswith("published")} == {
        k: v for k, v in without.items() if not k.startswith("published")}
    assert with_them["published"] == len(others) and without["published"] == 0
    assert ledger.result_sets(ledger_table) == ledger.result_sets(own)
    lines = ledger.to_markdown(ledger_table).splitlines()
    assert lines[0].endswith("| published by others (not counted) |")
    published_lines = [line for line in lines if "published:" not in line and "{cite:p}`deepbench`: *" in line]
    assert published_lines and all("|  |  |  |" in line for line in published_lines)


def test_the_conclusions_say_what_the_published_sources_show(ledger_table):
    text = ledger.conclusions(ledger_table)
    assert "**What others published on GPUs:**" in text and "never counted" in text
    assert "Published by others, on their GPUs (not counted as ours)" in text


def test_a_page_glues_the_published_rows_it_shows():
    glued = notebook.published_glue("03")
    assert glued["c03_published_count"] == str(len(published_rules.verdicts("03")))
    assert "deepbench/V100: context only" in glued["c03_published"]


def test_cited_json_names_each_source_once():
    entries = json.loads((published.SOURCES_DIR / "cited.json").read_text())["sources"]
    keys = [e["key"] for e in entries]
    assert len(keys) == len(set(keys)) and all(e["found"] for e in entries)
