"""What a claim page says about its sets and verdicts (`lstmstudy.notebook`): every set, its provenance, and
no verdict where none was measured."""

from __future__ import annotations

import pandas as pd

from lstmstudy import notebook, results
from lstmstudy.claims import cudnn_fallback as claim
from lstmstudy.rules import Outcome, Verdict, mark_host_bound
from tests import gpu_rows


def verdict(hardware_id: str, outcome: Outcome, text: str = "2.50x", **extra) -> Verdict:
    ours = None if outcome == Outcome.NOT_MEASURED else 2.5
    return Verdict(claim.NAME, claim.STATEMENT, hardware_id, claim.SEED_FIGURE, ours, text, outcome, claim.RULE,
                   **extra)


def test_the_glued_prose_names_every_set_and_no_outcome_where_nothing_was_measured():
    found = [verdict("cpu-a", Outcome.REPRODUCED), verdict("cpu-b", Outcome.PARTLY, "1.80x"),
             verdict("cpu-c", Outcome.NOT_MEASURED, "not measured: no fused kernel here")]
    glued = notebook.verdict_glue("c01", found)
    assert glued["c01_cpu"] == ("On cpu-a (CPU analogue): 2.50x: reproduced. On cpu-b (CPU analogue): 1.80x: partly. "
                                "On cpu-c: not measured: no fused kernel here.")
    assert glued["c01_cuda"] == "Not measured on a GPU: no GPU result set is stored yet."
    table = notebook.verdict_table(found)
    assert table.evidence.tolist() == ["CPU analogue", "CPU analogue", "not measured"]
    assert table["interval"].tolist() == ["none (point rule)", "none (point rule)", "–"]
    few = Verdict(claim.NAME, claim.STATEMENT, "cuda-a", claim.SEED_FIGURE, 0.96, "0.96x", Outcome.NOT_REPRODUCED,
                  claim.RULE, low=0.89, high=1.03, fewest_timings=5)
    assert notebook.verdict_table([few])["interval"][0].startswith("rough range from few timings, not a 95% interval")


def test_every_interval_that_decided_is_in_the_table():
    two = verdict("cuda-a", Outcome.INCONCLUSIVE, low=1.7, high=1.9, parts=(("PyTorch", 1.7, 1.9), ("TF", 1.8, 2.3)))
    assert notebook.verdict_table([two])["interval"][0] == "PyTorch 1.7-1.9; TF 1.8-2.3"


def _store(root, hardware_id: str, dirty: bool | None, commit: str = "abc123", calibration_s: float | None = None
           ) -> None:
    fingerprint = {"hardware_id": hardware_id, "device_kind": "cpu", "git_commit": commit}
    if calibration_s is not None:
        fingerprint["calibration_s"] = calibration_s
    if dirty is not None:
        fingerprint["git_dirty"] = dirty
    results.record_fingerprint(claim.NAME, fingerprint, root)
    fp_id = results.fingerprint_id(fingerprint)
    results.append(claim.NAME, hardware_id, [{"kernel": "torch.fused", "hardware_id": hardware_id, "device": "cpu",
                                              "device_kind": "cpu", "status": "ok", "median_s": 1.0,
                                              "samples_s": [1.0, 1.0], "round_sizes": [1, 1], "round_seed": 3,
                                              "fingerprint_id": fp_id, "batch": 1, "timesteps": 1, "features": 1,
                                              "hidden": 1}], root)


def test_a_set_measured_from_a_dirty_tree_says_so(tmp_path):
    _store(tmp_path, "cpu-clean-2t", False)
    _store(tmp_path, "cpu-dirty-2t", True, "def456")
    _store(tmp_path, "cpu-old-2t", None, "")
    data = results.load(claim.NAME, tmp_path)
    sets = notebook.hardware_sets(data, claim.NAME, tmp_path).set_index("hardware_id")["measured at"]
    assert sets.to_dict() == {"cpu-clean-2t": "abc123", "cpu-dirty-2t": "def456 (uncommitted changes)",
                              "cpu-old-2t": "not recorded"}
    box = notebook.glance(claim.CLAIM, data, [verdict("cpu-dirty-2t", Outcome.REPRODUCED),
                                              verdict("cpu-old-2t", Outcome.NOT_MEASURED)], tmp_path)
    # the box's one line of CPU sets, grouped by outcome
    assert ("**On CPUs** (each a *CPU analogue*, never counted as a reproduction): *reproduced* on `cpu-dirty-2t` "
            "(2.5x); not measured on `cpu-old-2t`.") in box
    # rows stored, but the claim could not be measured on the set: no evidence kind for it
    assert "`cpu-old-2t` (not measured, 1 configurations" in box
    assert f"**What the CPU analogue measures**, and what it cannot show: {claim.CLAIM.analogue}." in box
    assert ("`cpu-dirty-2t` (CPU analogue, 1 configurations, interleaved rounds, one process (the intervals hold no "
            "noise between processes), measured with uncommitted changes)") in box
    assert "**No GPU set is stored: the claim itself, about GPUs, is not measured here**" in box
    assert "**On a GPU: not measured.** No GPU result set is stored for this claim" in box
    assert notebook.hardware_sets(pd.DataFrame()).empty
    skipped = data.assign(status="skipped")
    assert set(notebook.hardware_sets(skipped).evidence) == {"not measured"}
    assert set(notebook.hardware_sets(skipped).timing) == {"nothing timed"}
    assert box.startswith("**What the source says:** " + claim.SEED_FIGURE)
    assert "{ref}`the glossary <outcome-words>`" in box


def _judged(hardware_id: str, outcome: Outcome, ours: float, low: float, high: float, **extra) -> Verdict:
    return Verdict(claim.NAME, claim.STATEMENT, hardware_id, claim.SEED_FIGURE, ours, f"{ours}x", outcome, claim.RULE,
                   low=low, high=high, **extra)


def test_the_box_leads_with_the_gpu_figure_its_unit_interval_verdict_and_how_sure():
    gpu = _judged("cuda-a", Outcome.REPRODUCED, 3.3, 2.5, 4.4)
    box = notebook.glance(claim.CLAIM, pd.DataFrame(), [_judged("cpu-b", Outcome.PARTLY, 1.5, 1.2, 1.8), gpu])
    lines = box.split("\n\n")
    assert lines[1] == (f"**On the GPU** (`cuda-a`): {claim.CLAIM.figure_words.format('3.3x')} (95% interval: "
                        f"2.5-4.4x): **reproduced**. {notebook.how_sure(gpu)}")
    assert lines[2].endswith("*partly* on `cpu-b` (1.5x).")
    few = _judged("cuda-a", Outcome.NOT_REPRODUCED, 0.96, 0.89, 1.03, fewest_timings=5)
    assert "rests on a row of 5 timings" in notebook.how_sure(few) and "decides it" in notebook.how_sure(few)
    undecided = _judged("cuda-a", Outcome.INCONCLUSIVE, 0.96, 0.89, 1.03, fewest_timings=5)
    assert "too few, or too scattered" in notebook.how_sure(undecided)
    assert "straddles" in notebook.how_sure(_judged("cuda-a", Outcome.INCONCLUSIVE, 1.0, 0.5, 2.0))


def test_a_gpu_set_that_could_not_time_the_claim_is_not_called_absent(tmp_path):
    """Claim 7's H100 set holds rows skipped for want of a second GPU: the box says a GPU set is stored and why it
    did not measure the claim, not that none is stored."""
    _store(tmp_path, "cuda-one-gpu", False)
    data = results.load(claim.NAME, tmp_path).assign(status="skipped")
    box = notebook.glance(claim.CLAIM, data, [verdict("cuda-one-gpu", Outcome.NOT_MEASURED)], tmp_path)
    assert "No GPU set is stored" not in box
    assert "**1 GPU set(s) stored, none of which could time this claim" in box


def test_a_gpu_hosts_cpu_set_is_named_by_the_verdict_it_is_paired_in(tmp_path):
    _store(tmp_path, "cpu-host-16t", False)
    data = results.load(claim.NAME, tmp_path)
    box = notebook.glance(claim.CLAIM, data, [verdict("cuda-x vs cpu-host-16t", Outcome.PARTLY)], tmp_path)
    assert "`cpu-host-16t` (paired in the GPU verdict `cuda-x vs cpu-host-16t`, 1 configurations" in box


def test_a_set_says_at_what_speed_its_runs_were_measured(tmp_path):
    _store(tmp_path, "cpu-fast-2t", False, calibration_s=0.000195)
    _store(tmp_path, "cpu-old-2t", False)
    speed = notebook.hardware_sets(results.load(claim.NAME, tmp_path), claim.NAME, tmp_path).set_index(
        "hardware_id")["speed"]
    assert speed.to_dict() == {"cpu-fast-2t": "1 run(s), fp32 GEMM in 0.195 ms",
                               "cpu-old-2t": "not recorded (measured before runs were calibrated)"}


def test_a_set_lists_the_runs_and_machines_its_rows_come_from(tmp_path):
    _store(tmp_path, "cpu-fast-2t", False, calibration_s=0.000195)
    _store(tmp_path, "cpu-fast-2t", False)  # a second run into the set, with no speed recorded
    runs = notebook.hardware_sets(results.load(claim.NAME, tmp_path), claim.NAME, tmp_path).set_index(
        "hardware_id")["runs"]["cpu-fast-2t"]
    assert runs.startswith("2 run(s): host ") and "fp32 GEMM in 0.195 ms: " in runs and "speed not recorded: " in runs


def test_a_table_without_rows_is_a_sentence_and_a_missing_value_is_words():
    empty = notebook.shown(pd.DataFrame(columns=["a", "b"]), "Nothing was measured here.")
    assert empty.data == "Nothing was measured here."
    table = notebook.shown(pd.DataFrame({"paper MPE": [float("nan"), -0.5], "ours": [1.5, float("nan")]}), "none",
                           {"paper MPE": "not in the paper"})
    assert table.to_dict("list") == {"paper MPE": ["not in the paper", -0.5], "ours": [1.5, "not measured"]}


def test_a_headline_of_parts_names_its_intervals_truly_and_says_a_shared_note_once():
    from dataclasses import replace

    parts = (("ReLU (Keras 3.15 on its torch backend)", 5.2, 8.1), ("blog model (Keras 3.15 on its torch backend)", 3.1,
                                                                     4.3))
    case = Verdict(claim.NAME, claim.STATEMENT, "cuda-a", claim.SEED_FIGURE, None, "", Outcome.REPRODUCED, claim.RULE,
                   parts=parts)
    assert claim.CLAIM.headline(case) == ("slowdown per part (95% intervals, all Keras 3.15 on its torch backend): "
                                          "ReLU 5.2-8.1x; blog model 3.1-4.3x")
    spread = replace(case, parts=(("at batch 1", 1.1, 1.3), ("at batch 4096 (5 timings: a spread)", 0.01, 0.02)))
    assert "(intervals: 95% unless a part says it rests on few timings)" in claim.CLAIM.headline(spread)
    few = replace(case, fewest_timings=5)
    assert "(rough ranges from few timings, not 95% intervals" in claim.CLAIM.headline(few)
    batch = replace(claim.CLAIM, figure_words="GPU ahead from batch {}", unit="", part_unit="x")
    crossing = replace(spread, ours=8.0)
    assert batch.headline(crossing, parts=False) == "GPU ahead from batch 8"
    assert batch.headline(crossing).endswith("at batch 1 1.1-1.3x; at batch 4096 (5 timings: a spread) 0.01-0.02x")


def test_the_raw_data_are_download_links_to_each_sets_rows_and_fingerprints():
    listed = notebook.downloads("bucketing")
    line = next(line for line in listed.splitlines() if "cuda-h100" in line)
    assert "{download}`rows, every raw sample (CSV) <../../results/bucketing/cuda-h100-80gb-hbm3-2a1d35.csv>`" in line
    assert "{download}`fingerprints (JSON) <../../results/bucketing/cuda-h100-80gb-hbm3-2a1d35.json>`" in line
    assert notebook.downloads("no_such_claim") == "No result set is stored for this claim."


def test_a_verdict_resting_on_host_bound_rows_says_so_wherever_a_page_shows_it():
    """The box (through `how_sure`), the verdict table and the glued prose each add the clause; a verdict on rows that
    are not host-bound reads as before."""
    from dataclasses import replace

    plain = _judged("cuda-a", Outcome.REPRODUCED, 3.3, 2.5, 4.4)
    bound = replace(plain, host_bound=True)
    clause = "rests on host-bound rows: the host's launches, not the GPU, set their time"
    assert notebook.how_sure(bound) == f"{notebook.how_sure(plain)} It {clause}."
    assert clause not in notebook.how_sure(plain)
    assert f"**reproduced**. {notebook.how_sure(bound)}" in notebook.glance(claim.CLAIM, pd.DataFrame(), [bound])
    assert notebook.verdict_table([bound, plain]).verdict.tolist() == [f"reproduced ({clause})", "reproduced"]
    assert notebook.verdict_glue("c01", [bound])["c01_cuda"] == f"On cuda-a (GPU): 3.3x: reproduced ({clause})."


def test_only_a_gpu_verdict_whose_set_holds_host_bound_rows_is_marked(tmp_path):
    gpu_rows.store(tmp_path, claim.NAME, "cuda-a", [(3e-3, 1e-3, []), (1e-3, 1e-3, [])])
    gpu_rows.store(tmp_path, claim.NAME, "cuda-b", [(1e-3, 1e-3, [])])
    gpu_rows.store(tmp_path, claim.NAME, "cuda-old", [(3e-3, None, [])])
    data = results.load(claim.NAME, tmp_path)
    found = [verdict("cuda-a", Outcome.REPRODUCED), verdict("cuda-a vs cpu-h", Outcome.PARTLY),
             verdict("cuda-a", Outcome.NOT_MEASURED), verdict("cuda-b", Outcome.REPRODUCED),
             verdict("cuda-old", Outcome.REPRODUCED), verdict("cpu-c", Outcome.REPRODUCED)]
    assert [v.host_bound for v in mark_host_bound(found, data)] == [True, True, False, False, False, False]


def test_a_gpu_set_says_what_its_rows_timed_and_whether_its_gpu_slowed_its_clocks(tmp_path):
    """One line per set where the page describes its rows (`hardware_sets`, the box's dropdown): how many rows are
    host-bound and how many ran throttled, or, for the rows stored before device time was, that it was not
    recorded."""
    gpu_rows.store(tmp_path, claim.NAME, "cuda-new", [(3e-3, 1e-3, ["hw_slowdown"]), (1e-3, 1e-3, [])])
    gpu_rows.store(tmp_path, claim.NAME, "cuda-old", [(3e-3, None, [])])
    _store(tmp_path, "cpu-a-2t", False)
    data = results.load(claim.NAME, tmp_path)
    timing = notebook.hardware_sets(data, claim.NAME, tmp_path).set_index("hardware_id").timing
    assert timing["cuda-new"].endswith("; 1 of 2 timed rows host-bound (their time is over 1.5x the GPU's own work); "
                                       "1 of 2 timed rows ran while the GPU named a clock slowdown (throttled)")
    assert timing["cuda-old"].endswith("; device time not recorded: rows stored before it was")
    assert timing["cpu-a-2t"] == "interleaved rounds, one process (the intervals hold no noise between processes)"
    box = notebook.glance(claim.CLAIM, data, [verdict("cuda-new", Outcome.REPRODUCED)], tmp_path)
    assert "ran while the GPU named a clock slowdown (throttled)" in box
