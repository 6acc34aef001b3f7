from __future__ import annotations

import csv
import io
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from lstmstudy import results
from lstmstudy.errors import ResultsCorrupt


def row(i: int, **extra) -> dict:
    return {"claim": "demo", "kernel": "torch.fused", "precision": "fp32", "phase": "inference", "batch": i,
            "timesteps": 8, "features": 4, "hidden": 16, "layers": 1, "bidirectional": False, "config": "{}",
            "hardware_id": "cpu-test-1t", "status": "ok", "median_s": 0.001 * (i + 1),
            "samples_s": [0.001, 0.002], "created_at": f"2026-01-01T00:00:{i % 60:02d}+00:00", **extra}


def test_append_and_load_roundtrip(results_root):
    path = results.append("demo", "cpu-test-1t", [row(0), row(1)])
    results.append("demo", "cpu-test-1t", [row(2)])
    results.append("demo", "cuda-other", [row(3, hardware_id="cuda-other")])
    assert path == results_root / "demo" / "cpu-test-1t.csv"
    frame = results.load("demo")
    assert len(frame) == 4 and set(frame.hardware_id) == {"cpu-test-1t", "cuda-other"}
    assert frame.samples[0] == [0.001, 0.002] and frame.batch.tolist() == [0, 1, 2, 3]
    assert frame.bidirectional.tolist() == [False] * 4
    assert results.stored_keys("demo", "cpu-test-1t") == ({results.row_key(row(i)) for i in range(3)}, set())


def test_stored_files_get_the_mode_any_new_file_gets_and_leave_only_hidden_locks(results_root):
    """Not the temporary file's 0600 (it is renamed into place), and no lock file among the results."""
    umask = os.umask(0o022)
    try:
        rows = results.append("demo", "cpu-test-1t", [row(0)])
        results.append("demo", "cpu-test-1t", [row(1)])
        fingerprint = results.record_fingerprint("demo", {"hardware_id": "cpu-test-1t", "host": "h"})
    finally:
        os.umask(umask)
    assert {path.stat().st_mode & 0o777 for path in (rows, fingerprint)} == {0o644}
    assert sorted(p.name for p in (results_root / "demo").iterdir() if not p.name.startswith(".")) == [
        "cpu-test-1t.csv", "cpu-test-1t.json"]
    assert not list((results_root / "demo").glob(".*.tmp"))


def test_load_of_a_claim_with_no_results_is_empty(results_root):
    frame = results.load("nothing")
    assert frame.empty and "median_s" in frame.columns


def test_latest_keeps_the_newest_row_of_a_rerun(results_root):
    results.append("demo", "cpu-test-1t", [row(0, median_s=1.0, created_at="2026-01-01T00:00:00+00:00")])
    results.append("demo", "cpu-test-1t", [row(0, median_s=2.0, created_at="2026-01-02T00:00:00+00:00")])
    assert results.load("demo").median_s.tolist() == [2.0]
    assert sorted(results.load("demo", latest=False).median_s) == [1.0, 2.0]


def test_unknown_column_is_refused(results_root):
    with pytest.raises(ValueError, match="unknown result columns"):
        results.append("demo", "cpu-test-1t", [{"nonsense": 1}])


def _edit_line(index, old, new):
    def damage(text):
        lines = text.split("\n")
        lines[index] = lines[index].replace(old, new, 1)
        return "\n".join(lines)
    return damage


@pytest.mark.parametrize("damage, where", [
    (_edit_line(1, "torch.fused,", "torch.fused,extra,"), ":2: expected"),
    (_edit_line(2, ",ok,", ",fine,"), ":3: status 'fine'"),
    (_edit_line(0, "claim,kernel", "kernel"), ":1: header"),
    (_edit_line(1, "0.002]", "0.002"), ":2: samples_s"),
])
def test_corrupt_file_is_reported_and_never_overwritten(results_root, damage, where):
    path = results.append("demo", "cpu-test-1t", [row(0), row(1)])
    bad = damage(path.read_text())
    path.write_text(bad)
    with pytest.raises(ResultsCorrupt, match=f"cpu-test-1t.csv{where}"):
        results.load("demo")
    with pytest.raises(ResultsCorrupt):
        results.append("demo", "cpu-test-1t", [row(2)])
    assert path.read_text() == bad


def test_non_numeric_field_names_column_and_line(results_root):
    path = results.append("demo", "cpu-test-1t", [row(0)])
    path.write_text(path.read_text().replace(",0.001,", ",fast,", 1))
    with pytest.raises(ResultsCorrupt, match=r":2: column 'median_s'"):
        results.load("demo")


def _append_many(root: str, worker: int, count: int) -> None:
    os.environ["LSTMSTUDY_RESULTS"] = root
    for i in range(count):
        results.append("demo", "cpu-test-1t", [row(worker * 1000 + i)])


def test_concurrent_appends_lose_nothing(results_root):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(results_root), w, 15)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    frame = results.load("demo", latest=False)
    assert sorted(frame.batch) == sorted(w * 1000 + i for w in range(4) for i in range(15))


def test_a_writer_killed_mid_run_leaves_every_finished_row_readable(results_root):
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(os.getcwd())!r})
        os.environ["LSTMSTUDY_RESULTS"] = {str(results_root)!r}
        from lstmstudy import results
        from tests.test_results import row
        i = 0
        while True:
            results.append("demo", "cpu-test-1t", [row(i, samples_s=[0.001] * 2000)])
            print(i, flush=True)
            i += 1
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    for _ in range(8):  # let it finish some rows, then kill it without warning
        proc.stdout.readline()
    time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    frame = results.load("demo", latest=False)
    assert len(frame) >= 8
    assert sorted(frame.batch) == list(range(len(frame)))  # a prefix: nothing torn, nothing lost


def test_fingerprints_are_kept_once_each(results_root):
    fp = {"hardware_id": "cpu-test-1t", "cpu_model": "x"}
    results.record_fingerprint("demo", fp)
    results.record_fingerprint("demo", fp)
    results.record_fingerprint("demo", {**fp, "cpu_model": "y"})
    assert [f["cpu_model"] for f in results.fingerprints("demo")["cpu-test-1t"]] == ["x", "y"]
    (results_root / "demo" / "cpu-test-1t.json").write_text("{not json")
    with pytest.raises(ResultsCorrupt, match="cpu-test-1t.json"):
        results.fingerprints("demo")


def test_rows_with_many_samples_read_back(results_root):
    results.append("demo", "cpu-test-1t", [row(0, samples_s=[1.2345678901234567e-05] * 20_000)])
    assert len(results.load("demo").samples[0]) == 20_000


def test_a_file_of_the_first_schema_reads_and_the_next_append_upgrades_it(results_root):
    path = results_root / "demo" / "cpu-test-1t.csv"
    path.parent.mkdir(parents=True)
    first = io.StringIO(newline="")
    writer = csv.writer(first, lineterminator="\n")
    writer.writerow(results.FIRST_COLUMNS)
    writer.writerow([results._format(row(0).get(c)) for c in results.FIRST_COLUMNS])
    path.write_text(first.getvalue())
    old = results.load("demo").iloc[0]
    assert old.samples == [0.001, 0.002] and old.round_sizes == [] and old.fingerprint_id == ""
    results.append("demo", "cpu-test-1t", [row(1, round_sizes=[1, 1], round_seed=5)])
    assert path.read_text().splitlines()[0] == ",".join(results.COLUMNS)
    frame = results.load("demo")
    assert frame.batch.tolist() == [0, 1] and frame.round_sizes.tolist() == [[], [1, 1]]
    assert frame.round_seed[1] == 5 and frame.timer[1] == "" and frame.host_bound[1] is None


def test_the_flags_are_formed_on_reading_never_taken_from_the_file(results_root):
    """`noisy` from the row's interval under today's bound (a row stored under the old +-10% rule says otherwise),
    `host_bound` from wall time against device time, `throttled` from the GPU's state at its group's ends."""
    calm = dict(median_s=0.010, ci_low_s=0.0088, ci_high_s=0.0112)  # +-12%: noisy under +-10%, not under +-14%
    wide = dict(median_s=0.010, ci_low_s=0.008, ci_high_s=0.012)  # +-20%
    state = {"start": {"sm_mhz": 1980, "slowdowns": []}, "end": {"sm_mhz": 1500, "slowdowns": ["hw_thermal"]}}
    results.append("demo", "cpu-test-1t", [
        row(0, **calm, noisy=True, device_s=0.009, kernels_per_call=5.0, timer="cuda-events"),
        row(1, **wide, noisy=False, device_s=0.002, kernels_per_call=260.0, gpu_state=state),
        row(2, median_s=0.010, gpu_state={"start": {"slowdowns": []}, "end": {"slowdowns": []}}),
        # both ends idle, but the power cap held the clocks down for 2 ms between them
        row(3, median_s=0.010, gpu_state={"start": {"slowdowns": [], "power_violation_ns": 10},
                                          "end": {"slowdowns": [], "power_violation_ns": 2_000_010}})])
    frame = results.load("demo").set_index("batch")
    assert frame.noisy.tolist() == [False, True, None, None]
    assert frame.host_bound.tolist() == [False, True, None, None]  # 10 ms against 9 ms of kernels; against 2 ms
    assert frame.throttled.tolist() == [None, True, False, True]
    assert frame.timer[0] == "cuda-events" and frame.kernels_per_call[1] == 260.0
    assert frame.gpu_state[1]["end"]["sm_mhz"] == 1500


def test_a_set_written_before_the_timing_columns_reads(results_root):
    before = results.SCHEMAS[-2]
    assert set(results.COLUMNS) - set(before) == set(results.TIMING_COLUMNS)
    path = results_root / "demo" / "cpu-test-1t.csv"
    path.parent.mkdir(parents=True)
    text = io.StringIO(newline="")
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(before)
    writer.writerow([results._format(row(0).get(c)) for c in before])
    path.write_text(text.getvalue())
    frame = results.load("demo")
    assert frame.device_s.isna().all() and frame.gpu_state[0] == {} and frame.throttled[0] is None


def test_every_fingerprint_has_an_id_that_its_rows_can_name(results_root):
    fp = {"hardware_id": "cpu-test-1t", "cpu_model": "x"}
    results.record_fingerprint("demo", fp)
    stored = results.fingerprints("demo")["cpu-test-1t"][0]
    assert stored["id"] == results.fingerprint_id(fp) == results.fingerprint_id(stored)
    assert results.fingerprint_id({**fp, "cpu_model": "y"}) != stored["id"]
