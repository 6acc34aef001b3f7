"""`lstmstudy measure`: every claim's grid measured without notebooks, resumable, with clear errors."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from lstmstudy import cli, kernels, results, sweep
from lstmstudy.backends import CHOSEN_NOTE, isa_cap
from lstmstudy.claims import LEASE_ORDER, lookup, registry
from lstmstudy.hardware import fingerprint


@pytest.mark.isa
def test_a_quick_run_measures_every_claim_without_the_notebook_stack(quick_measurement):
    done = quick_measurement.done
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert f"note: {CHOSEN_NOTE}" in done.stderr and CHOSEN_NOTE not in done.stdout  # a note: on stderr
    assert done.stderr.count(CHOSEN_NOTE) == 1  # said once, before measuring
    measured = [claim for claim in registry() if claim.name in quick_measurement.claims]
    assert measured and len(measured) == len(quick_measurement.claims)
    assert isa_cap() or measured == registry()  # every claim, but for the capped pass's 16-bit ones
    for claim in measured:
        frame = results.load(claim.name, quick_measurement.root, latest=False)
        assert not frame.empty, f"{claim.stem} stored no rows"
        assert f"{claim.name}: " in done.stdout  # its one-line summary
        errors = frame[frame.status == "error"]
        assert errors.empty, f"{claim.stem}: {errors.error.tolist()}"  # a blocked import would be an error row
        assert not frame.error.str.contains("blocked").any()
    if "kernels" in quick_measurement.claims:  # its GEMM, beside the kernels
        assert not results.load("roofline", quick_measurement.root).empty


@pytest.mark.isa
def test_a_baseline_this_cpu_cannot_run_fused_is_skipped_with_the_reason(quick_measurement):
    """Claim 4's bf16 raw baseline: measured where oneDNN has a bf16 LSTM (AVX-512), else a skipped row saying why."""
    frame = results.load("frameworks_vs_baseline", quick_measurement.root)
    raw = frame[(frame.kernel == "torch.raw") & (frame.precision == "bf16")]
    assert not raw.empty
    reason = kernels.available("cpu", "bf16")["torch.raw"]
    if reason:
        assert set(raw.status) == {"skipped"} and all(reason in error for error in raw.error)
    else:
        assert set(raw.status) == {"ok"} and set(raw.observed_kernel) == {"onednn"}


def test_keras_runs_on_its_torch_backend_and_its_rows_say_so(quick_measurement):
    frame = results.load("cudnn_fallback", quick_measurement.root)
    keras_rows = frame[frame.framework == "keras"]
    assert not keras_rows.empty and set(keras_rows.backend) == {"torch"}
    assert set(frame[frame.framework == "torch"].backend) == {""}
    ok = frame[frame.status == "ok"]
    assert set(ok.compute_dtype) <= {"float32", "bfloat16", "float16"} and "" not in set(ok.compute_dtype)


HW = fingerprint("cpu").hardware_id


def _measure(*args: str) -> int:
    return _measure_on("cpu", *args)


def _measure_on(device: str, *args: str) -> int:
    return cli.main(["measure", "--device", device, "--no-progress", *args])


def test_a_deadline_exits_early_and_the_next_call_resumes_without_duplicates(tmp_path, capsys):
    root = str(tmp_path / "results")
    claim = lookup(["01"])[0]
    points = claim.points("cpu", quick=True)
    first_group = sweep.groups(points, claim.slow)[0]
    assert _measure("--claims", "01", "--quick", "--deadline", "0.001", "--results-dir", root) == 0
    out = capsys.readouterr().out
    assert "left for the next call" in out and "run the same command again to resume" in out
    assert len(results.load(claim.name, tmp_path / "results", latest=False)) == len(first_group) < len(points)
    assert _measure("--claims", "cudnn_fallback", "--quick", "--results-dir", root) == 0
    assert "nothing left to measure" in capsys.readouterr().out
    stored = results.load(claim.name, tmp_path / "results", latest=False)
    assert len(stored) == len(points) == len({results.row_key(row) for row in stored.to_dict("records")})


@pytest.mark.parametrize(("args", "message"), [
    (["--claims", "99"], "unknown claim '99'; known: all, gpu-order, 01_cudnn_fallback"),
    (["--deadline", "-5"], "--deadline must be a positive number of seconds, got -5"),
    (["--plan", "lease", "--claims", "01"], "--plan lease chooses the claims itself: give --plan or --claims"),
    (["--plan", "lease"], "--plan lease cuts the GPU grids to what their verdicts read; on 'cpu' measure"),
])
def test_bad_arguments_are_one_clear_line(args, message, capsys, tmp_path):
    assert _measure(*args, "--results-dir", str(tmp_path)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"lstmstudy: error: {message}") and err.count("\n") == 1
    assert not (tmp_path / "cudnn_fallback").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
@pytest.mark.parametrize("command", [["measure"], ["env", "--check"]])
def test_a_gpu_asked_for_without_one_is_one_clear_line(command, capsys):
    assert cli.main([*command, "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lstmstudy: error: device 'cuda' was asked for") and err.count("\n") == 1


@pytest.mark.isa
def test_the_smoke_check_reports_what_really_ran(capsys):
    assert cli.main(["env", "--device", "cpu", "--check"]) == 0
    out = capsys.readouterr().out
    assert "torch.fused fp32 train" in out and "ran onednn, computed in float32" in out
    assert "Keras backend" in out and "ready to measure" in out
    assert "FAIL" not in out


def test_the_check_stops_measuring_only_where_every_claim_would_be_spoilt(monkeypatch, capsys):
    """On a short lease a failed 16-bit line or a missing NVML costs some rows, which say why; only the fused kernel
    failing in fp32 (cuDNN unusable) is worth not measuring at all."""
    from lstmstudy import check

    lines = [check.Check("torch.fused fp16 train", "ran aten-loop, computed in float16", False),
             check.Check("NVML energy counter", "NVMLError: not supported", False)]
    monkeypatch.setattr(check, "checks", lambda device: iter(lines))
    assert check.run("cpu") == 0
    out = capsys.readouterr().out
    assert out.count("FAIL") == 2
    assert out.rstrip().endswith("ready to measure; 2 check(s) failed: the rows they name will say why")
    lines.append(check.Check("torch.fused fp32 train", "RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED",
                             False, blocking=True))
    assert check.run("cpu") == 1
    assert capsys.readouterr().out.rstrip().endswith(
        "1 check(s) failed that spoil every claim: fix them before measuring")


@pytest.mark.gpu
def test_the_smoke_check_probes_the_raw_baseline_on_a_gpu(capsys):
    cli.main(["env", "--device", "cuda", "--check"])
    assert "torch.raw fp32 inference" in capsys.readouterr().out


@pytest.mark.gpu
def test_the_smoke_check_probes_keras_cudnn_at_every_precision_on_a_gpu(capsys):
    """Keras's torch backend hides a cuDNN failure behind its loop: at 16 bits too, the check must look."""
    cli.main(["env", "--device", "cuda", "--check"])
    out = capsys.readouterr().out
    assert all(f"keras.cudnn_auto {precision} train" in out for precision in ("fp32", "fp16", "bf16")), out


#: the fewest tests `pytest -m gpu` collects on a GPU node without TensorFlow: lower it only with gpu tests removed
GPU_TESTS_AT_LEAST = 24


def test_the_gpu_tests_collect_on_a_node_without_the_notebook_stack(tmp_path):
    """`pytest -m gpu` on a GPU node: no test file may import papermill, Jupyter or TensorFlow at the top, nor skip
    itself whole where they are missing. Every file with a gpu test collects some, and their number never drops."""
    import os
    import re
    import subprocess
    import sys
    from collections import Counter

    from conftest import NOT_ON_A_GPU_NODE, ROOT, import_blocker

    (tmp_path / "sitecustomize.py").write_text(import_blocker(missing=NOT_ON_A_GPU_NODE))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "KERAS_BACKEND": "torch"}
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu", "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    collected = Counter(re.findall(r"^(tests/\S+\.py)::", done.stdout, re.MULTILINE))
    marked = {path.relative_to(ROOT).as_posix() for path in (ROOT / "tests").glob("test_*.py")
              if re.search(r"pytest\.mark\.gpu\b", path.read_text())}
    skipped_whole = sorted(marked - set(collected))
    assert marked and not skipped_whole, f"no gpu test collected from {skipped_whole}:\n{done.stdout[-3000:]}"
    assert sum(collected.values()) >= GPU_TESTS_AT_LEAST, collected


def _gpu_node(tmp_path, *args: str, **env: str):
    """Run scripts/gpu-node.sh from a copy of the checkout (the device tool runs it in one), with $OUT."""
    import os
    import shutil
    import subprocess
    import sys

    from conftest import ROOT

    copy, out = tmp_path / "checkout", tmp_path / "out"
    if not (copy / "scripts").exists():  # a second call runs in the same copy
        (copy / "scripts").mkdir(parents=True)
        out.mkdir(exist_ok=True)
        shutil.copy(ROOT / "scripts" / "gpu-node.sh", copy / "scripts")
        for part in ("lstmstudy", "tests", "pyproject.toml"):  # the check runs tests/test_gpu_timing.py
            (copy / part).symlink_to(ROOT / part)
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(out), "LSTMSTUDY_RESULTS": str(copy / "results"),
           "LSTMSTUDY_HOST": "node", "LSTMSTUDY_GIT_COMMIT": "abc1234", "LSTMSTUDY_SITE": str(tmp_path / "site"),
           **env}
    done = subprocess.run(["bash", str(copy / "scripts" / "gpu-node.sh"), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    return done, out


#: Installed as the node's `sitecustomize` for the rehearsal: in `lstmstudy measure`, the second group of points
#: hangs in native code while the flag file says "armed", as a group blocked in NCCL, a CUPTI flush or cuDNN would:
#: SIGALRM and SIGTERM are masked, so no Python handler runs, and libc's sleep never returns to the interpreter.
HANG = """
import os
import sys

if "lstmstudy.cli" in sys.orig_argv and "measure" in sys.orig_argv:
    import ctypes
    import signal
    from pathlib import Path

    from lstmstudy import sweep

    flag, seen, measure_group = Path(os.environ["REHEARSAL_HANG"]), [], sweep.measure_group

    def hanging(points, *args):
        seen.append(points)
        if len(seen) == 2 and flag.read_text() == "armed":
            flag.write_text("hanging")
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM})
            ctypes.CDLL(None).sleep(3600)
        return measure_group(points, *args)

    sweep.measure_group = hanging
"""


def test_a_group_hung_in_native_code_is_killed_packed_and_gone_past_by_the_next_call(tmp_path):
    """The GPU issue's rehearsal on the CPU: the first call stores claim 6's group (skipped rows: no NVML) and hangs
    in the next, claim 1's first, deaf to SIGTERM, and the backstop kills it before the call's limit, with the
    results packed; the second call stores the hung group as error rows and measures the rest, with no row twice.
    Claim 6's group takes a moment, so the hang is reached within the short deadline however busy the machine, and
    the limit is near the shortest the script accepts (it measures only with 20 s left after 20 s for packing)."""
    import io
    import tarfile
    import time

    site, flag = tmp_path / "site", tmp_path / "hang"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HANG)
    args = ("measure", "60", "--device", "cpu", "--quick", "--claims", "06", "01", "--no-progress")
    older = tmp_path / "checkout" / "results" / "mixed_precision" / "cuda-earlier.csv"  # an earlier call's
    older.parent.mkdir(parents=True)
    older.write_text("claim\n")
    flag.write_text("armed")
    limit = 56  # measuring needs 20 s left after 20 s for packing; the script's own start may take 15 s when busy
    env = {"LSTMSTUDY_SITE": str(site), "REHEARSAL_HANG": str(flag), "LSTMSTUDY_CALL_LIMIT": str(limit)}
    start = time.monotonic()
    done, out = _gpu_node(tmp_path, *args, **env)
    assert time.monotonic() - start < limit and flag.read_text() == "hanging"
    assert done.returncode == 137, done.stdout[-2000:] + done.stderr[-2000:]  # the backstop's SIGKILL
    with tarfile.open(out / "results.tgz") as packed:
        names = packed.getnames()
    # this call's files, no others: claim 6's stored rows, claim 1's fingerprint and its hung group's rows
    assert all(n.startswith(("results/energy/", "results/cudnn_fallback/")) for n in names), names
    assert {n.rsplit(".", 1)[-1] for n in names} == {"csv", "json", "rows"}, names
    assert any(n.startswith("results/cudnn_fallback/.") and n.endswith(".rows") for n in names), names
    assert "packed" in (out / "console.log").read_text()

    (out / "results.tgz").unlink()
    done, out = _gpu_node(tmp_path, *args, **env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "stored as errors: an earlier call was killed measuring them" in done.stdout
    with tarfile.open(out / "results.tgz") as packed:
        csv = next(packed.extractfile(m).read() for m in packed.getmembers()
                   if m.name.startswith("results/cudnn_fallback/") and m.name.endswith(".csv"))
    stored = pd.read_csv(io.BytesIO(csv))
    assert not stored.duplicated(list(results.KEY_COLUMNS)).any()
    cut = stored[stored.error.fillna("").str.startswith("CutOff:")]
    assert len(cut) >= 1 and set(stored.status) == {"ok", "error"} and set(cut.index) == set(
        stored.index[stored.status == "error"])
    assert not list((tmp_path / "checkout" / "results").rglob(".*.rows"))


def test_the_lease_plan_is_listed_without_a_gpu(capsys):
    assert _measure_on("cuda", "--plan", "lease", "--plan-only") == 0
    out = capsys.readouterr().out
    assert out.startswith("plan on cuda (planned from each claim's seconds per point, not measured):")
    lines = out.splitlines()
    judged = next(i for i, line in enumerate(lines) if "judged claims of the lease" in line)
    assert [line.split()[0] for line in lines[judged - 5:judged]] == list(LEASE_ORDER)
    assert " 0 points" not in out and " slow " in lines[-1]  # steps with nothing new are left out; compiles last


def test_the_gpu_node_measures_the_lease_plan_into_a_store_outside_the_checkout(tmp_path):
    """The device tool lays the checkout anew for each call: the node's store, filled once from the checkout's
    results/, keeps what a call measured for the next; what the call wrote is packed whole."""
    import tarfile

    done, _ = _gpu_node(tmp_path, "measure", "60", "--plan-only")
    assert done.returncode == 0 and "judged claims of the lease" in done.stdout, done.stderr[-2000:]
    earlier = tmp_path / "checkout" / "results" / "energy" / "cuda-earlier.csv"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("claim\n")
    node = tmp_path / "node" / "results"
    done, out = _gpu_node(tmp_path, "measure", "60", "--claims", "06", "--device", "cpu", "--no-progress",
                          LSTMSTUDY_RESULTS=str(node))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (node / "energy" / "cuda-earlier.csv").read_text() == "claim\n"  # filled from the checkout
    assert sorted(p.name for p in earlier.parent.iterdir()) == ["cuda-earlier.csv"]  # nothing written there
    with tarfile.open(out / "results.tgz") as packed:
        assert {n for n in packed.getnames() if n.endswith(".csv")} == {f"results/energy/{HW}.csv"}


def test_one_call_checks_measures_and_packs_within_its_limit(tmp_path):
    """The lease's one call rehearsed on this CPU (LSTMSTUDY_DEVICE=cpu): the smoke check, then measuring, then
    the results packed, all inside the call's limit."""
    import tarfile
    import time

    limit = 240
    start = time.monotonic()
    done, out = _gpu_node(tmp_path, "check", "measure", "120", "--quick", "--claims", "06", "--no-progress",
                          LSTMSTUDY_DEVICE="cpu", LSTMSTUDY_CALL_LIMIT=str(limit))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert time.monotonic() - start < limit
    assert "ready to measure" in done.stdout and "energy: 0 measured, 2 skipped" in done.stdout
    with tarfile.open(out / "results.tgz") as packed:
        assert f"results/energy/{HW}.csv" in packed.getnames()
    assert "packed" in (out / "console.log").read_text()


def test_the_gpu_node_script_names_what_is_missing_in_one_line(tmp_path):
    done, _ = _gpu_node(tmp_path, "measure", "120", LSTMSTUDY_GIT_COMMIT="")
    assert done.returncode != 0 and "set LSTMSTUDY_GIT_COMMIT" in done.stderr and len(done.stderr.splitlines()) == 1
    done, _ = _gpu_node(tmp_path, "sweep")
    assert done.returncode == 2 and done.stderr.startswith("usage: bash scripts/gpu-node.sh check | measure")
    done, _ = _gpu_node(tmp_path, "check", "measure", "60", LSTMSTUDY_CHECK_S="1")  # a check that overruns
    assert done.returncode == 1 and done.stderr.rstrip().endswith(
        "check: stopped after 1 s (LSTMSTUDY_CHECK_S): measure not started"), done.stderr[-2000:]
    assert not (tmp_path / "checkout" / "results").exists()


def test_the_gpu_node_script_stops_where_keras_is_missing(tmp_path):
    """Without the carried wheels every Keras point would become an error row, not retried by the next call."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "keras.py").write_text("raise ImportError('no keras on this node')\n")
    done, out = _gpu_node(tmp_path, "measure", "120", PYTHONPATH=str(blocker))
    # the import's own error, in one line
    assert done.returncode == 1 and "keras cannot be imported (ImportError: no keras on this node)" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    (blocker / "keras.py").write_text("__version__ = '3.14.0'\n")  # a torch backend that skips cuDNN silently
    done, out = _gpu_node(tmp_path, "measure", "120", PYTHONPATH=str(blocker))
    assert done.returncode == 1 and "keras 3.14.0 is older than 3.15.1" in done.stderr
    assert not (tmp_path / "checkout" / "results").exists()


def test_a_lease_call_measures_in_one_process_and_any_other_call_as_asked(monkeypatch, capsys):
    """Worker processes (`sweep.run`) each prepare every point again: a 15-minute lease cannot pay for them, so
    `--plan lease` measures in `LEASE_PROCESSES`; elsewhere the claims' plan decides unless --processes says."""
    from lstmstudy import claims, hardware

    asked: list = []
    monkeypatch.setattr(claims.Claim, "run", lambda self, device, **options: asked.append(options["processes"]) or [])
    monkeypatch.setattr(hardware, "resolve_device",
                        lambda device="auto": torch.device(str(device).replace("auto", "cpu")))
    monkeypatch.setenv("LSTMSTUDY_HOST", "lease-node")
    assert _measure_on("cuda", "--plan", "lease") == 0 and set(asked) == {claims.LEASE_PROCESSES} == {1}
    asked.clear()
    assert _measure_on("cpu", "--claims", "01") == 0 and asked == [None]  # the claim's plan: timing.WORKER_PROCESSES
    asked.clear()
    assert _measure_on("cpu", "--claims", "01", "--processes", "2") == 0 and asked == [2]
    assert cli.main(["measure", "--device", "cpu", "--processes", "0"]) == 2
    assert "--processes must be at least 1, got 0" in capsys.readouterr().err
