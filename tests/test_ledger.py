"""The claims ledger and the conclusions are computed from the claim modules' verdicts, never typed."""

from __future__ import annotations

import itertools
import re
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from lstmstudy import ledger, plots, results, toc
from lstmstudy.claims import Claim, registry
from lstmstudy.cli import SUMMARY_PAGES
from lstmstudy.rules import Outcome, Verdict
from tests import gpu_rows

ROOT = Path(__file__).resolve().parent.parent


def fake_claim(number: str, verdicts: list[tuple[str, float, str]]) -> Claim:
    """A claim whose verdicts are given: the ledger must show them as they are."""
    statement = "A statement with *stars*, a | pipe and `ticks`"

    def judge(frame):
        return [Verdict(f"fake_{number}", statement, hw, "2-5x", ours, f"{ours:.2f}x", Outcome(outcome), "rule")
                for hw, ours, outcome in verdicts]

    return Claim(number=number, name=f"fake_{number}", statement=statement, seed_figure="2-5x",
                 rule="reproduced at 2x or more", defaults={"cpu": {}, "cuda": {}}, grid=lambda **_: [],
                 measure=lambda points, **_: [], verdicts=judge, seconds_per_point={"cpu": 1.0, "cuda": 1.0},
                 source="blog post (seed 000)", citations=("blogpost-lstm-gpu", "chollet-dlwp2", "so-cudnnlstm"))


@pytest.fixture
def toc_file(tmp_path):
    toc = tmp_path / "_toc.yml"
    toc.write_text(textwrap.dedent("""\
        format: jb-book
        root: book/intro
        parts:
          - chapters:
              - file: book/claims/01_first
              - file: book/claims/02_second.ipynb
              - file: book/ledger
        """))
    return toc


CLAIMS = [fake_claim("01", [("cpu-a", 2.5, "reproduced"), ("cuda-b", 1.5, "partly")]), fake_claim("02", [])]


def test_the_ledger_judges_the_registered_claims_in_order():
    claims = registry(judged_only=True)
    assert [c.number for c in claims] == [f"{i:02d}" for i in range(1, len(claims) + 1)]
    assert all(c.statement and c.seed_figure and c.rule and c.source for c in claims)
    assert [c.name for c in registry()][-1] == "kernels"  # measured, never judged


def test_the_table_has_one_row_per_claim_and_hardware_set(toc_file, results_root):
    table = ledger.table(results_root, claims=CLAIMS, toc=toc_file)
    assert list(table.columns) == ledger.COLUMNS
    assert table[["claim", "hardware", "verdict"]].values.tolist() == [
        ["01", "cpu-a", "reproduced"], ["01", "cuda-b", "partly"], ["02", "", Outcome.NOT_MEASURED.value]]
    assert table.page.tolist() == ["book/claims/01_first", "book/claims/01_first", "book/claims/02_second"]
    assert table["our figure"].tolist() == ["2.50x", "1.50x", "no stored result set"]


def test_the_markdown_links_pages_cites_sources_and_escapes_text(toc_file, results_root):
    text = ledger.to_markdown(ledger.table(results_root, claims=CLAIMS, toc=toc_file))
    assert "{doc}`Claim 1 </book/claims/01_first>`" in text
    assert "{cite:p}`blogpost-lstm-gpu,chollet-dlwp2,so-cudnnlstm`" in text
    assert r"\*stars\*, a \| pipe and \`ticks\`" in text
    assert all(line.count(" | ") == 5 for line in text.splitlines())  # six cells in every row


def test_the_conclusions_follow_the_verdicts_and_count_only_gpu_evidence(toc_file, results_root):
    table = ledger.table(results_root, claims=CLAIMS, toc=toc_file)
    assert table.evidence.tolist() == ["CPU analogue", "GPU", ""]
    text = ledger.conclusions(table)
    assert text.startswith("**Where the data come from:** 1 GPU result set(s) (cuda-b) and 1 CPU result set(s) "
                           "(cpu-a).")
    assert "Of the 1 verdicts on GPU sets: 0 reproduced, 0 above the seed's range, 1 partly reproduced" in text
    assert "On GPUs: **partly reproduced** on `cuda-b` (1.50x)." in text
    assert "Its CPU analogue (not counted as a reproduction): reproduced on `cpu-a` (2.50x)." in text
    assert "neither confirmed nor refuted" in text and "No GPU result set is stored" not in text
    assert "CPU analogue: reproduced (not counted)" in ledger.to_markdown(table)
    # the same claims with other figures say something else: nothing is hard-coded
    others = [fake_claim("01", [("cpu-a", 2.5, "reproduced"), ("cpu-c", 1.0, "not reproduced")]), CLAIMS[1]]
    text = ledger.conclusions(ledger.table(results_root, claims=others, toc=toc_file))
    assert "not reproduced on `cpu-c`" in text and "No GPU result set is stored, so no claim about GPUs" in text
    assert "**Its GPU claim is untested**" in text and "**reproduced**" not in text
    assert ledger.counts(ledger.table(results_root, claims=others, toc=toc_file)) == {
        "claims": 2, "verdicts": 3, "gpu_verdicts": 0, "reproduced": 0, "exceeds": 0, "partly": 0,
        "not_reproduced": 0, "inconclusive": 0, "holds": 0, "does_not_hold": 0, "cpu_analogues": 2,
        "not_measured": 1, "not_assessed": 0,
        "gpu_sets": 0, "cpu_sets": 2, "published": 0, "published_sources": 0}


def test_a_set_whose_noise_was_not_assessed_is_neither_counted_nor_called_an_analogue(toc_file, results_root):
    claims = [fake_claim("01", [("cpu-a", 2.5, "reproduced"), ("cpu-x", 2.6, Outcome.NOT_ASSESSED.value),
                                ("cuda-y", 2.7, Outcome.NOT_ASSESSED.value)])]
    table = ledger.table(results_root, claims=claims, toc=toc_file)
    n = ledger.counts(table)
    assert (n["not_assessed"], n["cpu_analogues"], n["gpu_verdicts"]) == (2, 1, 0)
    text = ledger.conclusions(table)
    assert "No verdict on `cpu-x`, `cuda-y`: timed in one burst per row" in text
    assert "2 give no verdict because their set was timed in one burst per row" in text
    assert "reproduced on `cpu-x`" not in text and "**Its GPU claim is untested**" in text


def test_exceeds_and_inconclusive_gpu_verdicts_are_named(toc_file, results_root):
    claims = [fake_claim("01", [("cuda-a", 40.0, "exceeds the seed"), ("cuda-b", 2.0, "inconclusive")])]
    table = ledger.table(results_root, claims=claims, toc=toc_file)
    text = ledger.conclusions(table)
    assert "**exceeds the seed** on `cuda-a` (40.00x), and **inconclusive** on `cuda-b` (2.00x)" in text
    assert ledger.counts(table)["exceeds"] == 1 and ledger.counts(table)["inconclusive"] == 1


def test_a_gpu_set_says_how_many_rows_are_host_bound_and_throttled_and_a_cpu_set_says_nothing_new(toc_file,
                                                                                                   results_root):
    """Of 3 GPU rows, 2 spent over 1.5x the GPU's own work (`observe.HOST_BOUND`), 1 ran while the GPU named a
    slowdown; the verdict on that set rests on host-bound rows, the CPU set's does not."""
    gpu_rows.store(results_root, "fake_01", "cuda-b", [(3e-3, 1e-3, ["sw_thermal"]), (1.6e-3, 1e-3, []),
                                                       (1.2e-3, 1e-3, [])])
    gpu_rows.store(results_root, "fake_01", "cpu-a", [(1e-3, None, [])])
    table = ledger.table(results_root, claims=CLAIMS[:1], toc=toc_file).set_index("hardware")
    assert table.timing["cuda-b"] == ("0 of 3 timed rows noisy (95% re-run interval wider than +-14%); 2 of 3 timed "
                                      "rows host-bound (their time is over 1.5x the GPU's own work); 1 of 3 timed "
                                      "rows ran while the GPU named a clock slowdown (throttled)")
    assert table.timing["cpu-a"] == "0 of 1 timed rows noisy (95% re-run interval wider than +-14%)"
    assert "2 of 3 timed rows host-bound" in ledger.to_markdown(table.reset_index())
    marked = {v.hardware_id: v.host_bound for v in CLAIMS[0].judge(results.load("fake_01", results_root))}
    assert marked == {"cpu-a": False, "cuda-b": True}


def test_a_gpu_set_stored_before_device_time_says_it_was_not_recorded(toc_file, results_root):
    """The first H100 set's rows hold no device time and no GPU state: its words say so, and name no slowdown."""
    gpu_rows.store(results_root, "fake_01", "cuda-b", [(3e-3, None, []), (1e-3, None, [])])
    timing = ledger.table(results_root, claims=CLAIMS[:1], toc=toc_file).set_index("hardware").timing["cuda-b"]
    assert timing.endswith("; device time not recorded: rows stored before it was")
    assert "host-bound" not in timing and "throttled" not in timing
    h100 = results.load("mixed_precision", ROOT / "results", sets="cuda-h100-80gb-hbm3-2a1d35")  # the stored set
    assert ledger.noise(h100).endswith("; device time not recorded: rows stored before it was")


def test_claim_pages_come_from_the_toc(toc_file):
    assert toc.claim_pages(toc_file) == {"01": "book/claims/01_first", "02": "book/claims/02_second"}
    assert toc.toc_files(toc_file) == ["book/intro", "book/claims/01_first", "book/claims/02_second", "book/ledger"]


@pytest.mark.parametrize("name", SUMMARY_PAGES)
def test_summary_sources_are_stripped_and_parameterised(name):
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "strip outputs in notebooks/"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and "results_dir" in tagged[0].source


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in SUMMARY_PAGES if name != "published"])  # it reads no results
def test_summary_pages_render_from_an_empty_store(name, tmp_path):
    import nbformat
    import papermill

    out = tmp_path / f"{name}.ipynb"
    papermill.execute_notebook(str(ROOT / "notebooks" / f"{name}.ipynb"), str(out), kernel_name="python3",
                               progress_bar=False, cwd=str(ROOT), parameters={"results_dir": str(tmp_path / "results")})
    executed = nbformat.read(out, as_version=4)
    markdown = [o["data"]["text/markdown"] for c in executed.cells if c.cell_type == "code"
                for o in c.outputs if "text/markdown" in o.get("data", {})]
    assert markdown and "not measured" in " ".join(markdown)


def test_a_pair_verdict_names_two_sets_and_each_set_counts_once():
    table = pd.DataFrame({"claim": ["01", "02", "02"], "hardware": ["cuda-h", "cuda-h vs cpu-h", "cpu-x"],
                          "evidence": ["GPU", "GPU", "CPU analogue"], "verdict": ["reproduced"] * 3})
    assert ledger.result_sets(table) == ["cpu-h", "cpu-x", "cuda-h"]
    assert ledger.data_sources(table) == "1 GPU result set(s) (cuda-h) and 2 CPU result set(s) (cpu-h, cpu-x)"
    assert ledger.counts(table)["gpu_sets"] == 1 and ledger.counts(table)["cpu_sets"] == 2


def test_a_claim_with_two_statements_gets_one_block_each():
    rows = ledger.table(claims=[c for c in registry(judged_only=True) if c.number == "04"])
    blocks = [rule for rule, _ in itertools.groupby(rows.rule)]
    assert len(blocks) == len(set(blocks)) == 2  # each rule's verdicts together, the claim's own first
    own = rows[rows.rule == rows.rule.iloc[0]]
    assert set(own.statement) == {"PyTorch's LSTM is ~50% slower than the raw cuDNN baseline (DeepBench), and "
                                  "TensorFlow far slower"}
    assert ledger.to_markdown(rows).count("Claim 4") == 2


def test_a_statement_judged_only_on_sets_without_verdicts_says_so_once(toc_file, results_root):
    claims = [fake_claim("01", [("cpu-x", 2.6, Outcome.NOT_ASSESSED.value),
                                ("cpu-y", 0.0, Outcome.NOT_MEASURED.value)])]
    text = ledger.conclusions(ledger.table(results_root, claims=claims, toc=toc_file))
    assert "No verdict on `cpu-x`" in text and "Not measurable on the stored sets (`cpu-y`):" in text
    only_bursts = [fake_claim("01", [("cpu-x", 2.6, Outcome.NOT_ASSESSED.value)])]
    text = ledger.conclusions(ledger.table(results_root, claims=only_bursts, toc=toc_file))
    assert "No verdict on `cpu-x`" in text and "Not measurable" not in text and "neither confirmed nor refuted" in text


def _ledger_rows(*rows: dict) -> pd.DataFrame:
    base = {c: "" for c in ledger.COLUMNS} | {"claim": "01", "rule": "r1", "ours": None, "low": None, "high": None,
                                              "parts": [], "brief": ""}
    return pd.DataFrame([base | row for row in rows], columns=ledger.COLUMNS)


def test_the_landing_cells_name_each_set_its_verdict_and_figure_and_count_the_rest():
    table = _ledger_rows(
        {"hardware": "cuda-h100-80gb-hbm3-2a1d35", "evidence": "GPU", "verdict": "reproduced",
         "brief": "slowdown 9.54 (6.51-14.2)", "ours": 9.54, "low": 6.51, "high": 14.2,
         "headline": "slowdown 9.54x (95% interval: 6.51-14.2x)"},
        {"hardware": "cpu-a-2t", "evidence": "CPU analogue", "verdict": "partly", "brief": "slowdown 1.6 (1.3-1.9)"},
        {"hardware": "cpu-b-2t", "evidence": "not measured", "verdict": "not measured on this hardware"},
        {"hardware": "cpu-c-2t", "evidence": "not measured", "verdict": "not measured on this hardware"},
        {"hardware": "published:woolf/K80", "evidence": "published", "verdict": "context only"},
        {"hardware": "cuda-other-000000", "evidence": "GPU", "verdict": "partly", "rule": "r2"})  # another statement
    cells = ledger.landing_cells(table, "01")
    many = _ledger_rows(*({"hardware": f"cpu-{k}-2t", "evidence": "CPU analogue", "verdict": verdict, "ours": ours}
                          for k, (verdict, ours) in enumerate([("partly", 1.5), ("reproduced", 3.4), ("partly", 1.86)])))
    assert ledger.landing_cells(many, "01")["cpu"] == "partly on 2 sets (1.5-1.86); reproduced on 1 set (3.4)"
    assert cells == {
        "gpu": "<code>cuda-h100-80gb-hbm3</code>: <strong>reproduced</strong>, slowdown 9.54x (95% interval: 6.51-14.2x)",
        "cpu": "partly on 1 set; not measurable on 2 sets",
        "others": "<em>context only</em>: K80"}
    rows, labels, bands, empty = ledger.chart_data(table, claims=[])
    assert rows.empty and labels == {} and bands == {} and empty == {}


def test_the_landing_figure_draws_the_figures_with_intervals_and_leaves_context_out():
    from lstmstudy.claims import lookup

    claim = lookup(["01"])[0]
    table = _ledger_rows(
        {"hardware": "cuda-x-2a1d35", "evidence": "GPU", "verdict": "reproduced", "ours": 9.5, "low": 6.5,
         "high": 14.2, "rule": claim.rule},
        {"hardware": "published:woolf/K80", "evidence": "published", "verdict": "context only", "ours": 2.1,
         "rule": claim.rule},
        {"hardware": "cpu-b-2t", "evidence": "not measured", "verdict": "not measured on this hardware",
         "rule": claim.rule})
    rows, labels, bands, empty = ledger.chart_data(table, claims=[claim])
    assert list(rows.hardware) == ["cuda-x-2a1d35"] and labels == {"01": "1: slowdown"} and empty == {}
    assert bands == {"01": claim.bands.span(Outcome.REPRODUCED)} == {"01": (2.0, 15.0)}
    caption = ledger.chart_caption(labels, bands, empty, rows)
    assert "shaded region of claim(s) 1 is what its rule calls reproduced" in caption and "without marks" not in caption


def test_the_landing_figure_has_a_row_for_every_judged_claim_and_says_why_one_has_no_mark():
    from lstmstudy.claims import lookup

    first, seventh = lookup(["01", "07"])
    table = _ledger_rows(
        {"claim": "01", "hardware": "cpu-a-2t", "evidence": "CPU analogue", "verdict": "reproduced", "ours": 3.0,
         "low": 2.5, "high": 3.5, "rule": first.rule},
        {"claim": "01", "hardware": "cuda-x-2a1d35", "evidence": "not measured",
         "verdict": "not measured on this hardware", "our figure": "awaits a rerun: why", "rule": first.rule},
        {"claim": "07", "hardware": "cuda-x-2a1d35", "evidence": "not measured",
         "verdict": "not measured on this hardware", "our figure": "not measured (needs >= 2 GPUs): x",
         "rule": seventh.rule})
    rows, labels, bands, empty = ledger.chart_data(table, claims=[first, seventh])
    assert list(labels) == ["01", "07"] and labels["01"] == "1: slowdown\n(GPU: awaits a rerun)"
    assert empty == {"07": "not measured (needs >= 2 GPUs)"}
    assert "A row without marks says why in it." in ledger.chart_caption(labels, bands, empty, rows)
    figure = plots.verdict_chart(rows, labels, bands, empty)
    texts = [t.get_text() for t in figure.axes[0].texts]
    assert texts == ["no figure: not measured (needs >= 2 GPUs)"]


#: what a verdict's text assembled from parts must never hold: doubled separators, empty brackets, runs of spaces,
#: or a kernel left dangling after a bracket ("2.84x (95% CI ...) torch.raw: fails")
GARBLED = re.compile(r";\s*;|,\s*,|\(\s*\)|\s{2,}|\) [a-z]+\.[a-z_]+:|\.\.(?!\.)")


def test_no_verdict_text_is_garbled(ledger_table):
    found = {text for text in ledger_table["our figure"] if GARBLED.search(text)}
    assert not found, found
    assert GARBLED.search("torch.fused 2.84x (95% CI 2.3-3.6) torch.raw: fails")  # the pattern a review found


def test_the_landing_answer_says_what_each_fix_was_worth_on_the_gpu_or_why_it_is_not_decided():
    from lstmstudy.claims import lookup

    first, fifth = lookup(["01", "05"])
    table = _ledger_rows(
        {"claim": "01", "hardware": "cuda-x-2a1d35", "evidence": "GPU", "verdict": "reproduced", "ours": 3.0,
         "low": 2.5, "high": 3.5, "rule": first.rule, "headline": "slowdown 3x (95% interval: 2.5-3.5x)"},
        {"claim": "05", "hardware": "cuda-x-2a1d35", "evidence": "not measured",
         "verdict": "not measured on this hardware", "our figure": "awaits a rerun: why", "rule": fifth.rule})
    answer = ledger.answer(table, claims=[first, fifth])
    assert (f"- {first.advice} Measured (claim 1) on `cuda-x`, slowdown 3x (95% interval: 2.5-3.5x); the "
            f"source's claim: *reproduced*.") in answer
    assert answer.endswith(f"- Not yet decided on a GPU here: {fifth.advice.rstrip('.')} (claim 5: awaits a rerun).")
    assert "No GPU result set is stored yet" in ledger.answer(table[table.claim == "none"], claims=[first])
