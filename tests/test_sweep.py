from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch

from lstmstudy import contract, hardware, results, sweep, timing
from lstmstudy.backends import keras_backend
from lstmstudy.errors import DeviceFailed, Skip
from lstmstudy.hardware import fingerprint
from lstmstudy.observe import Observation
from lstmstudy.shapes import LSTMShape

HW = fingerprint("cpu").hardware_id


def grid(n: int = 6) -> list[contract.Point]:
    return [contract.Point("torch.fake", LSTMShape(batch=b, timesteps=4, features=2, hidden=8))
            for b in range(1, n + 1)]


class EachGroupGets(sweep.Deadline):
    """A deadline for the tests of a group that overruns: every group may start, and must end `seconds` after its
    own start, however long a busy machine took to reach it (load stretches the set-up, not the window)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(at=time.monotonic() + 3600, seconds=seconds)

    def ends_next_group(self) -> float:
        return time.monotonic() + self.seconds

    def allows_another(self, claim: str, slow: bool = False) -> bool:
        return True


def fake_outcome() -> contract.PointResult:
    m = timing.Measurement(samples=(0.001, 0.002, 0.003), warmup=0, threads=1, sync="none")
    return contract.PointResult(measurement=m, flops=1e6, observed=Observation("cudnn", {"gpu_kernels": 3}))


def test_every_point_becomes_a_row_with_samples(results_root):
    report = sweep.run("demo", grid(3), lambda p, d: fake_outcome(), device="cpu", progress=False)
    assert (report.measured, report.errors, report.skipped) == (3, 0, 0)
    frame = results.load("demo")
    assert frame.batch.tolist() == [1, 2, 3] and set(frame.status) == {"ok"}
    assert frame.samples[0] == [0.001, 0.002, 0.003] and frame.median_s[0] == 0.002
    assert frame.achieved_flops[0] == pytest.approx(1e6 / 0.002)
    assert frame.framework[0] == "torch" and frame.hardware_id[0] == HW
    assert (results_root / "demo" / f"{HW}.json").exists()


def test_an_error_or_a_skip_becomes_a_row_and_the_sweep_goes_on(results_root):
    def measure(point, device):
        if point.shape.batch == 2:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")
        if point.shape.batch == 3:
            raise Skip("bf16 is not supported here")
        return fake_outcome()

    report = sweep.run("demo", grid(4), measure, device="cpu", progress=False)
    assert (report.measured, report.errors, report.skipped) == (2, 1, 1)
    frame = results.load("demo").set_index("batch")
    assert frame.status.to_dict() == {1: "ok", 2: "error", 3: "skipped", 4: "ok"}
    assert frame.error[2] == "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB"
    assert frame.error[3] == "bf16 is not supported here"
    assert pd_isna(frame.median_s[2])


def pd_isna(value) -> bool:
    return value != value


def test_an_interrupted_sweep_resumes_without_losing_or_duplicating(results_root):
    calls = []

    def interrupted(point, device):
        if point.shape.batch == 4:
            raise KeyboardInterrupt
        calls.append(point.shape.batch)
        return fake_outcome()

    with pytest.raises(KeyboardInterrupt):
        sweep.run("demo", grid(), interrupted, device="cpu", progress=False)
    assert sorted(results.load("demo").batch) == [1, 2, 3]
    report = sweep.run("demo", grid(), lambda p, d: calls.append(p.shape.batch) or fake_outcome(),
                       device="cpu", progress=False)
    assert report.already_stored == 3 and report.measured == 3
    assert calls == [1, 2, 3, 4, 5, 6]
    assert sorted(results.load("demo", latest=False).batch) == [1, 2, 3, 4, 5, 6]


def test_a_killed_sweep_resumes(results_root, monkeypatch):
    # one speed for both processes: this tests resuming, and a loaded machine's calibrations can lie 2x apart
    monkeypatch.setattr(hardware, "calibrate", lambda device, **options: 1e-3)
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from lstmstudy import hardware, sweep
        hardware.calibrate = lambda device, **options: 1e-3
        from tests.test_sweep import grid, fake_outcome
        def slow(point, device):
            print(point.shape.batch, flush=True)
            time.sleep(0.2)
            return fake_outcome()
        sweep.run("demo", grid(), slow, device="cpu", progress=False)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "LSTMSTUDY_RESULTS": str(results_root)})
    hang_guard = threading.Timer(300, proc.kill)  # a bound on a hang, not a wait: the child prints 4 within seconds
    hang_guard.start()
    # killed while measuring the fourth point; None: the child's output ended first (it exited, or the guard killed it)
    fourth = next((line for line in proc.stdout if line.strip() == "4"), None)
    hang_guard.cancel()
    assert fourth, f"the sweep ended (exit status {proc.wait()}) before it measured the fourth point"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert sorted(results.load("demo").batch) == [1, 2, 3]
    report = sweep.run("demo", grid(), lambda p, d: fake_outcome(), device="cpu", progress=False)
    # the point it was killed in is stored as cut off, for the next call to go past (a hang would kill it again)
    assert (report.already_stored, report.cut_off, report.measured) == (3, 1, 2)
    assert sorted(results.load("demo", latest=False).batch) == [1, 2, 3, 4, 5, 6]
    again = sweep.run("demo", grid(), lambda p, d: fake_outcome(), device="cpu", progress=False, retry_errors=True)
    assert again.measured == 1 and set(results.load("demo").status) == {"ok"}


def test_rerun_measures_again_and_load_keeps_the_newest(results_root):
    sweep.run("demo", grid(2), lambda p, d: fake_outcome(), device="cpu", progress=False)
    report = sweep.run("demo", grid(2), lambda p, d: fake_outcome(), device="cpu", progress=False, rerun=True)
    assert report.measured == 2
    assert len(results.load("demo", latest=False)) == 4 and len(results.load("demo")) == 2


def test_a_set_stored_at_another_speed_is_refused_in_one_line_and_kept(results_root, monkeypatch):
    """The same VM id ran 2.2x slower on another day: resuming would pair rows timed at two speeds in every ratio.
    Within the calibration's tolerance, or with `rerun`, it goes on."""
    from lstmstudy import hardware
    from lstmstudy.errors import SpeedChanged

    speed = {"s": 1e-3}
    monkeypatch.setattr(hardware, "calibrate", lambda device: speed["s"])
    sweep.run("demo", grid(2), lambda p, d: fake_outcome(), device="cpu", progress=False)
    stored = results.set_path("demo", fingerprint("cpu").hardware_id)
    before, fingerprints = stored.read_text(), stored.with_suffix(".json").read_text()
    speed["s"] = 2.2e-3
    with pytest.raises(SpeedChanged) as refused:
        sweep.run("demo", grid(4), lambda p, d: fake_outcome(), device="cpu", progress=False)
    said = str(refused.value)
    assert "\n" not in said and "in 2.2 ms, the runs that stored this set in 1 ms (2.2x apart)" in said
    assert "--rerun" in said
    assert stored.read_text() == before and stored.with_suffix(".json").read_text() == fingerprints
    assert sweep.run("demo", grid(4), lambda p, d: fake_outcome(), device="cpu", progress=False,
                     rerun=True).measured == 4
    speed["s"] = 2.0e-3  # near the stored runs' typical speed now (their upper median, 2.2 ms)
    assert sweep.run("demo", grid(5), lambda p, d: fake_outcome(), device="cpu", progress=False).measured == 1


def test_the_calibration_is_a_fixed_gemm_timed_as_its_fastest_try():
    from lstmstudy import hardware

    threads = torch.get_num_threads()
    seconds = hardware.calibrate(torch.device("cpu"), tries=5)
    assert 0 < seconds < 1 and torch.get_num_threads() == threads  # one thread while timing, the user's after
    assert hardware.speed_ratio(1.0, 2.2) == hardware.speed_ratio(2.2, 1.0) == pytest.approx(2.2)


def test_a_deadline_stops_between_points_and_the_next_call_resumes(results_root):
    deadline = sweep.Deadline.after(0.0)  # already passed: only the first point of the command starts
    report = sweep.run("demo", grid(), lambda p, d: fake_outcome(), device="cpu", progress=False, deadline=deadline)
    assert (report.measured, report.left) == (1, 5) and "5 left for the next call" in str(report)
    again = sweep.run("demo", grid(), lambda p, d: fake_outcome(), device="cpu", progress=False)
    assert (again.measured, again.already_stored, again.left) == (5, 1, 0)
    assert len(results.load("demo", latest=False)) == 6


def test_a_deadline_counts_across_claims_and_leaves_room_for_the_claims_longest_group(results_root):
    deadline = sweep.Deadline.after(60.0)
    deadline.record("demo", 120.0)  # a group of this claim already took two minutes: the next would overrun
    report = sweep.run("demo", grid(2), lambda p, d: fake_outcome(), device="cpu", progress=False, deadline=deadline)
    assert (report.measured, report.left) == (0, 2)
    # another claim's long group holds back nothing of this one's: its groups start while the deadline allows
    report = sweep.run("other", grid(2), lambda p, d: fake_outcome(), device="cpu", progress=False, deadline=deadline)
    assert (report.measured, report.left) == (2, 0)
    assert sweep.Deadline().allows_another("demo") and sweep.Deadline.after(None).at is None


def test_stored_errors_are_retried_only_when_asked(results_root):
    calls = []

    def flaky(point, device):
        calls.append(point.shape.batch)
        if len(calls) == 2:
            raise RuntimeError("cuDNN error: CUDNN_STATUS_EXECUTION_FAILED")
        return fake_outcome()

    first = sweep.run("demo", grid(3), flaky, device="cpu", progress=False)
    assert (first.measured, first.errors) == (2, 1)
    second = sweep.run("demo", grid(3), flaky, device="cpu", progress=False)
    assert (second.measured, second.already_stored, second.errors_not_retried) == (0, 2, 1)
    assert "1 stored errors not retried (--retry-errors)" in str(second)
    third = sweep.run("demo", grid(3), flaky, device="cpu", progress=False, retry_errors=True)
    assert (third.measured, third.already_stored) == (1, 2) and calls[-1] == 2
    history = results.load("demo", latest=False).set_index("batch")
    assert sorted(history.loc[2, "status"]) == ["error", "ok"]  # the file keeps both rows
    assert results.load("demo").set_index("batch").status[2] == "ok"  # load shows the newest
    assert results.stored_keys("demo", HW)[1] == set()


def test_a_cuda_error_that_poisons_the_process_stops_the_sweep(results_root):
    def measure(point, device):
        if point.shape.batch == 3:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return fake_outcome()

    with pytest.raises(DeviceFailed, match="leaves this process unusable.*Run the command again to resume"):
        sweep.run("demo", grid(5), measure, device="cpu", progress=False)
    frame = results.load("demo").set_index("batch")
    assert frame.status.to_dict() == {1: "ok", 2: "ok", 3: "error"}  # nothing after the poisoned point
    resumed = sweep.run("demo", grid(5), lambda p, d: fake_outcome(), device="cpu", progress=False)
    assert (resumed.measured, resumed.errors_not_retried) == (2, 1)


def test_out_of_memory_is_one_error_row_and_the_sweep_goes_on(results_root):
    def measure(point, device):
        if point.shape.batch == 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return fake_outcome()

    report = sweep.run("demo", grid(3), measure, device="cpu", progress=False)
    assert (report.measured, report.errors) == (2, 1)


@pytest.mark.parametrize(("message", "fatal"), [
    ("CUDA error: an illegal memory access was encountered", True),
    ("CUDA error: unspecified launch failure", True),
    ("CUDA error: device-side assert triggered", True),
    ("cudaErrorLaunchFailure", True),
    ("CUDA out of memory. Tried to allocate 2 GiB", False),
    ("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED", False),
])
def test_which_cuda_errors_poison_the_process(message, fatal):
    assert sweep.is_fatal_cuda_error(RuntimeError(message)) is fatal


def test_keras_rows_record_their_backend_in_the_key():
    keras_point = contract.Point("keras.cudnn_auto", LSTMShape(batch=1, timesteps=4, features=2, hidden=8))
    assert keras_point.key_fields()["backend"] == keras_backend() != ""
    assert grid(1)[0].key_fields()["backend"] == ""

def test_config_extras_are_part_of_the_key(results_root):
    shape = LSTMShape(batch=1, timesteps=4, features=2, hidden=8)
    points = [contract.Point("torch.fake", shape, config={"buckets": "auto"}),
              contract.Point("torch.fake", shape, config={"buckets": "none"})]
    assert sweep.run("demo", points, lambda p, d: fake_outcome(), device="cpu", progress=False).measured == 2
    assert sweep.run("demo", points, lambda p, d: fake_outcome(), device="cpu", progress=False).already_stored == 2


def test_bad_points_are_refused():
    shape = LSTMShape(batch=1, timesteps=4, features=2, hidden=8)
    with pytest.raises(ValueError, match="precision"):
        contract.Point("torch.fake", shape, precision="fp8")
    with pytest.raises(ValueError, match="phase"):
        contract.Point("torch.fake", shape, phase="eval")


def test_a_slow_kernel_gets_room_for_a_compile_before_the_deadline(results_root):
    deadline = sweep.Deadline.after(60.0)
    deadline.record("demo", 0.01)  # fast points so far: a compile could still take minutes
    slow = [contract.Point("torch.compiled", LSTMShape(batch=1, timesteps=4, features=2, hidden=8))]
    report = sweep.run("demo", grid(2) + slow, lambda p, d: fake_outcome(), device="cpu", progress=False,
                       deadline=deadline, slow=frozenset({"torch.compiled"}))
    assert (report.measured, report.left) == (2, 1)
    assert sweep.device_still_works(torch.device("cpu"))


# --- groups timed in interleaved rounds ---------------------------------------------------------------

SHAPE = LSTMShape(batch=2, timesteps=4, features=3, hidden=8)
PLAN = timing.Rounds(rounds=3, warmup=1, burst_s=0.0, burst_min_samples=2, extra_rounds=0)


def test_points_at_one_shape_and_phase_form_a_group_and_slow_kernels_stand_alone():
    other = LSTMShape(batch=4, timesteps=4, features=3, hidden=8)
    points = [contract.Point("torch.fused", SHAPE), contract.Point("torch.native", SHAPE, precision="bf16"),
              contract.Point("torch.fused", other), contract.Point("torch.fused", SHAPE, phase="train"),
              contract.Point("torch.native", SHAPE, config={"x": 1}), contract.Point("torch.compiled", SHAPE),
              contract.Point("torch.compiled", SHAPE, phase="train")]
    found = [[(p.kernel, p.shape.batch, p.phase, p.precision) for p in g]
             for g in sweep.groups(points, slow=frozenset({"torch.compiled"}))]
    assert found == [[("torch.fused", 2, "inference", "fp32"), ("torch.native", 2, "inference", "bf16"),
                      ("torch.native", 2, "inference", "fp32")],
                     [("torch.fused", 4, "inference", "fp32")], [("torch.fused", 2, "train", "fp32")],
                     [("torch.compiled", 2, "inference", "fp32")], [("torch.compiled", 2, "train", "fp32")]]


def test_a_group_is_timed_in_the_same_rounds_and_its_rows_say_so(results_root):
    from lstmstudy import kernels

    points = [contract.Point("torch.fused", SHAPE), contract.Point("torch.native", SHAPE),
              contract.Point("torch.fused", LSTMShape(batch=3, timesteps=4, features=3, hidden=8))]
    report = sweep.run("demo", points, kernels.prepare, PLAN, device="cpu", progress=False)
    assert report.measured == 3
    frame = results.load("demo").set_index(["kernel", "batch"])
    a, b, c = frame.loc[("torch.fused", 2)], frame.loc[("torch.native", 2)], frame.loc[("torch.fused", 3)]
    assert a.round_sizes and len(a.round_sizes) == len(b.round_sizes) == 3 and sum(a.round_sizes) == a.n_samples
    assert a.round_seed == b.round_seed != c.round_seed
    assert a.noisy in (True, False) and a.ci_low_s <= a.median_s <= a.ci_high_s
    fp = results.fingerprints("demo")[HW]
    assert a.fingerprint_id == fp[-1]["id"] and a.load_1m >= 0
    assert json.loads(a.thread_settings)["torch_intra"] == a.threads


def test_a_step_that_fails_in_its_rounds_is_an_error_row_and_its_group_goes_on(results_root):
    from lstmstudy import kernels

    def prepare(point, device):
        ready = kernels.prepare(point, device)
        if point.kernel != "torch.native":
            return ready
        calls = []

        def breaks_later():
            calls.append(1)
            if len(calls) > 2:  # the warm-up and the first round pass
                raise RuntimeError("cuDNN error: CUDNN_STATUS_EXECUTION_FAILED")
            return ready.step()

        return contract.Prepared(breaks_later, ready.sync, ready.finish)

    points = [contract.Point("torch.fused", SHAPE), contract.Point("torch.native", SHAPE)]
    report = sweep.run("demo", points, prepare, PLAN, device="cpu", progress=False)
    assert (report.measured, report.errors) == (1, 1)
    frame = results.load("demo").set_index("kernel")
    assert frame.status.to_dict() == {"torch.fused": "ok", "torch.native": "error"}
    assert "CUDNN_STATUS_EXECUTION_FAILED" in frame.error["torch.native"]
    assert len(frame.round_sizes["torch.fused"]) == 3


def _slow_prepare(seconds: float, calls: list | None = None):
    """Points whose every call takes `seconds` (a Python loop, as Keras's masked LSTM on the torch backend)."""
    def prepare(point, device):
        def step():
            if calls is not None:
                calls.append(point.shape.batch)
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                pass
        return contract.Prepared(step, None, lambda m: contract.PointResult(m, observed=Observation("aten-loop", {})))
    return prepare


#: 1 warm-up call and 10 rounds of one call each: 2.2 s for a point whose call takes 0.2 s
LONG = timing.Rounds(rounds=10, warmup=1, burst_s=0.0, burst_min_samples=1, extra_rounds=0)


def test_a_group_longer_than_a_whole_deadline_is_an_error_row_and_the_next_call_goes_on(results_root, monkeypatch):
    monkeypatch.setattr(sweep, "SLOW_POINT_S", 0.3)  # the least a call's first group gets
    slow, calls = frozenset({"torch.fake"}), []  # a group each
    report = sweep.run("demo", grid(2), _slow_prepare(0.2, calls), LONG, device="cpu", progress=False,
                       deadline=sweep.Deadline.after(0.5), slow=slow)
    assert calls == [1] * len(calls) and len(calls) < 1 + 10  # interrupted: the first point's rounds did not finish
    assert (report.measured, report.errors, report.left) == (0, 1, 1)
    row = results.load("demo").iloc[0]
    assert row.status == "error" and row.error.startswith("DeadlineReached: it ran past the 0 s it could have as a "
                                                          "call's first group, before its timing finished")
    again = sweep.run("demo", grid(2), lambda p, d: fake_outcome(), device="cpu", progress=False,
                      deadline=sweep.Deadline.after(60))
    assert (again.measured, again.errors_not_retried) == (1, 1)


def test_a_group_the_deadline_cuts_short_after_others_is_left_for_the_next_call(results_root):
    deadline, calls = sweep.Deadline.after(2.0), []  # time enough to start a group on a busy machine
    deadline.record("demo", 0.01)  # an earlier group of this command: this one does not have the whole deadline
    report = sweep.run("demo", grid(2), _slow_prepare(0.5, calls), LONG, device="cpu", progress=False,
                       deadline=deadline)
    assert calls and set(calls) == {1} and len(calls) < 1 + 10  # the first point's group started and was cut short
    assert (report.measured, report.errors, report.left) == (0, 0, 2)
    assert results.load("demo").empty
    assert signal.getsignal(signal.SIGALRM) is signal.SIG_DFL and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_calls_first_group_gets_the_whole_deadline_however_long_the_set_up_took(results_root):
    """Imports, a fingerprint or a build before it may spend most of a deadline: the first group still gets all
    of it from its own start (and every call makes progress)."""
    deadline = sweep.Deadline(at=time.monotonic() + 0.1, seconds=5.0)  # 4.9 s of it already spent
    report = sweep.run("demo", grid(2), _slow_prepare(0.2), PLAN, device="cpu", progress=False, deadline=deadline)
    assert (report.measured, report.errors, report.left) == (1, 0, 1)
    assert deadline.ends_next_group() == deadline.at  # the second group had to end by the deadline itself


def test_a_group_hung_in_native_code_shows_where_and_the_next_call_stores_it_as_cut_off(results_root):
    """SIGALRM cannot stop a call that never returns to Python (masked here, as in a driver): its traceback goes to
    stderr, its rows wait locked beside the set while the process lives, and the next call stores them as errors
    once the process is killed, and measures the rest."""
    script = textwrap.dedent(f"""
        import ctypes, signal, sys
        sys.path.insert(0, {os.getcwd()!r})
        from lstmstudy import sweep
        from tests.test_sweep import grid, fake_outcome
        from tests.test_sweep import EachGroupGets
        sweep.HANG_TRACEBACK_S = 0.1
        def hangs(point, device):
            if point.shape.batch == 3:
                print("hanging", flush=True)
                signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGALRM}})
                ctypes.CDLL(None).sleep(3600)
            return fake_outcome()
        sweep.run("demo", grid(4), hangs, device="cpu", progress=False, deadline=EachGroupGets(1.0))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "LSTMSTUDY_RESULTS": str(results_root)})
    stderr = []
    reader = threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True)
    reader.start()
    assert proc.stdout.readline().strip() == "hanging"
    assert results.store_cut_off("demo", HW) == 0  # its process lives: the group may still finish
    assert len(list((results_root / "demo").glob(f".{HW}.running-*.rows"))) == 1
    # 1.1 s after the group started, the traceback; a minute is a bound, not a wait
    waited_until = time.monotonic() + 60
    while not any("in hangs" in line for line in stderr) and time.monotonic() < waited_until:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    reader.join(timeout=30)
    assert "most recent call first" in "".join(stderr) and "in hangs" in "".join(stderr)
    report = sweep.run("demo", grid(4), lambda p, d: fake_outcome(), device="cpu", progress=False)
    assert (report.cut_off, report.already_stored, report.measured) == (1, 2, 1)
    assert "1 stored as errors: an earlier call was killed measuring them" in str(report)
    stored = results.load("demo", latest=False).set_index("batch")
    assert stored.status.to_dict() == {1: "ok", 2: "ok", 3: "error", 4: "ok"}
    assert stored.error[3].startswith("CutOff: the call that measured this group (from 20")
    assert not list((results_root / "demo").glob(".*.rows"))
    again = sweep.run("demo", grid(4), lambda p, d: fake_outcome(), device="cpu", progress=False)
    assert (again.cut_off, again.errors_not_retried, again.measured) == (0, 1, 0)


def test_a_group_left_by_an_exception_leaves_no_cut_off_rows(results_root):
    """Ctrl-C or an error the sweep does not catch: the process lived to see it, so the group is simply measured
    again by the next call, not stored as cut off."""
    def interrupted(point, device):
        assert len(list((results_root / "demo").glob(f".{HW}.running-*.rows"))) == 1  # while it runs
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep.run("demo", grid(2), interrupted, device="cpu", progress=False)
    assert not [p for p in (results_root / "demo").glob(".*") if not p.name.endswith(".lock")]
    report = sweep.run("demo", grid(2), lambda p, d: fake_outcome(), device="cpu", progress=False)
    assert (report.cut_off, report.measured) == (0, 2)


def test_cut_off_rows_brought_back_after_they_were_stored_are_not_stored_twice(results_root):
    """A marker unpacked again over a checkout whose set already holds its rows (the GPU node's round trip)."""
    point = grid(1)[0]
    row = sweep.make_row("demo", point, torch.device("cpu"), fingerprint("cpu"), status="error", error="CutOff: x")
    results.append("demo", HW, [row])
    (results_root / "demo" / f".{HW}.running-1.rows").write_text(json.dumps([row]))
    assert results.store_cut_off("demo", HW) == 0
    assert len(results.load("demo", latest=False)) == 1 and not list((results_root / "demo").glob(".*.rows"))


def test_the_alarm_fires_again_where_a_library_swallowed_it(results_root, monkeypatch):
    monkeypatch.setattr(sweep, "REARM_S", 0.05)
    monkeypatch.setattr(sweep, "UNWIND_S", 0.2)  # no second alarm while the first unwinds, then one
    swallowed = []

    def prepare(point, device):
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                time.sleep(0.01)
            except sweep.DeadlineReached:  # a library's `except BaseException: pass`
                if swallowed:
                    raise
                swallowed.append(point.shape.batch)
        return fake_outcome()

    deadline = EachGroupGets(0.1)
    deadline.record("demo", 0.01)  # not a call's first group: left for the next call when it overruns
    start = time.monotonic()
    report = sweep.run("demo", grid(1), prepare, device="cpu", progress=False, deadline=deadline)
    # the second alarm came 0.2 s after the first: long before the library's loop would have ended
    assert time.monotonic() - start < 30 and swallowed == [1] and report.left == 1


def test_a_group_stopped_by_sigterm_is_measured_again_not_stored_as_cut_off(results_root):
    """A time limit's SIGTERM reaching a group that runs Python (slow, not hung) takes its rows back."""
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.getcwd()!r})
        from lstmstudy import sweep
        from tests.test_sweep import grid, fake_outcome
        def slow(point, device):
            if point.shape.batch == 2:
                print("slow", flush=True)
                time.sleep(600)
            return fake_outcome()
        sweep.run("demo", grid(3), slow, device="cpu", progress=False)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "LSTMSTUDY_RESULTS": str(results_root)})
    assert proc.stdout.readline().strip() == "slow"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert not list((results_root / "demo").glob(".*.rows"))
    report = sweep.run("demo", grid(3), lambda p, d: fake_outcome(), device="cpu", progress=False)
    assert (report.cut_off, report.already_stored, report.measured) == (0, 1, 2)


def test_rounds_spread_over_worker_processes_are_stored_by_each_and_load_as_one_row(results_root):
    from lstmstudy import kernels, stats

    points = [contract.Point("torch.fused", SHAPE), contract.Point("torch.native", SHAPE)]
    plan = timing.Rounds(rounds=4, warmup=1, burst_s=0.0, burst_min_samples=2, extra_rounds=0, processes=2)
    report = sweep.run("demo", points, kernels.prepare, plan, device="cpu", progress=False)
    assert (report.measured, report.errors, report.processes) == (2, 0, 2)
    stored = results.load("demo", latest=False)
    assert sorted(stored.process.tolist()) == [0, 0, 1, 1] and set(stored.status) == {"ok"}
    assert {len(sizes) for sizes in stored.round_sizes} == {2}  # each worker times its share: 4 rounds over 2
    assert len(set(stored.round_seed)) == 2  # each worker shuffles its own rounds
    fused, native = (results.load("demo").set_index("kernel").loc[k] for k in ("torch.fused", "torch.native"))
    assert fused.process_rounds == native.process_rounds == [2, 2] and len(fused.samples) == fused.n_samples
    assert stats.interleaved(fused, native) and fused.ci_low_s <= fused.median_s <= fused.ci_high_s
    again = sweep.run("demo", points, kernels.prepare, plan, device="cpu", progress=False)
    assert again.already_stored == 2 and again.measured == 0


def test_a_rerun_leaves_out_the_rows_other_workers_stored_before_it(results_root):
    rows = [sweep.make_row("demo", point, torch.device("cpu"), fingerprint("cpu"), outcome=fake_outcome(),
                           process=process) for process in (0, 1) for point in grid(1)]
    results.append("demo", HW, rows)
    assert results.load("demo").process_rounds[0] == [1, 1]
    sweep.run("demo", grid(1), lambda p, d: fake_outcome(), device="cpu", progress=False, rerun=True)
    assert results.load("demo").process_rounds[0] == []  # the new worker 0 row alone
    done, failed = results.stored_keys("demo", HW, process=1)
    assert grid(1)[0].key() not in done | failed  # worker 1 measures its share again: its old row is not joined


def test_a_workers_error_is_measured_again_only_when_asked_and_worker_0s_error_stops_the_others(results_root):
    point, device, fp = grid(1)[0], torch.device("cpu"), fingerprint("cpu")
    results.append("demo", HW, [sweep.make_row("demo", point, device, fp, outcome=fake_outcome()),
                                sweep.make_row("demo", point, device, fp, status="error", error="CutOff", process=1)])
    assert results.stored_keys("demo", HW, process=1) == (set(), {point.key()})
    assert results.stored_keys("demo", HW, process=2) == (set(), set())  # worker 2 has not tried it yet
    results.append("demo", HW, [sweep.make_row("demo", point, device, fp, status="error", error="broken")])
    assert results.stored_keys("demo", HW, process=2) == (set(), {point.key()})  # worker 0 failed: none goes on


def test_one_process_asked_for_times_all_the_plans_rounds(results_root):
    """A lease's call measures in one process (`--plan lease`): it must time all the plan's rounds, not one worker's
    share of them."""
    from lstmstudy import kernels

    plan = timing.Rounds(rounds=4, warmup=0, burst_s=0.0, burst_min_samples=1, burst_max_samples=1,
                         extra_rounds=0, processes=2)
    sweep.run("demo", [contract.Point("torch.fused", SHAPE)], kernels.prepare, plan, device="cpu", progress=False,
              processes=1)
    (row,) = results.load("demo").itertuples()
    assert len(row.round_sizes) == 4 and row.process_rounds == []


WORKER_HANGS = '''
import os, time
from lstmstudy import contract, timing

def prepare(point, device):
    """In the parent, a finished point; in its worker, one that never ends."""
    if os.getpid() == int(os.environ["SWEEP_PID"]):
        m = timing.Measurement(samples=(0.001, 0.002), warmup=0, threads=1, sync="none", round_sizes=(1, 1), seed=1)
        return contract.PointResult(measurement=m)
    open(os.environ["WORKER_PID"], "w").write(str(os.getpid()))
    time.sleep(600)
'''
RUN_TWO_WORKERS = '''
import os
os.environ["SWEEP_PID"] = str(os.getpid())
from lstmstudy import contract, sweep, timing
from lstmstudy.shapes import LSTMShape
import worker_hangs
plan = timing.Rounds(rounds=2, warmup=0, burst_s=0.0, burst_min_samples=1, extra_rounds=0, processes=2)
sweep.run("demo", [contract.Point("torch.fake", LSTMShape(batch=1, timesteps=2, features=2, hidden=4))],
          worker_hangs.prepare, plan, device="cpu", progress=False)
'''


def test_a_sigterm_to_the_sweep_alone_ends_its_worker_too(tmp_path):
    """`kill PID` (a container stopped, a scheduler's time limit) reaches the measuring process only: its worker
    must not measure on, orphaned, beside the next call."""
    (tmp_path / "worker_hangs.py").write_text(WORKER_HANGS)
    marker = tmp_path / "worker.pid"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "LSTMSTUDY_RESULTS": str(tmp_path / "results"),
           "WORKER_PID": str(marker)}
    parent = subprocess.Popen([sys.executable, "-c", RUN_TWO_WORKERS], cwd=tmp_path, env=env)
    deadline = time.monotonic() + 240
    while not marker.exists() and parent.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), "the worker never started"
    time.sleep(0.5)
    worker = int(marker.read_text())
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=120) != 0
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)  # gone (reaped by the parent before it exited)


def test_a_run_beside_a_set_of_unknown_speed_measures_into_a_set_of_its_own(results_root, monkeypatch, capsys):
    """A set stored before runs were calibrated, maybe on another machine of this id: this run's rows could not be
    told from its rows nor paired at one speed, so they go into a set of their own, which later runs resume;
    `rerun` measures the stored set again instead."""
    speed = {"s": None}  # a run of before calibrations
    monkeypatch.setattr(hardware, "calibrate", lambda device: speed["s"])
    sweep.run("demo", grid(2), lambda p, d: fake_outcome(), device="cpu", progress=False)
    speed["s"] = 1e-3
    report = sweep.run("demo", grid(2), lambda p, d: fake_outcome(), device="cpu", progress=False)
    own = f"{HW}-{sweep.OWN_SET_SUFFIX}"
    assert report.measured == 2 and report.path.name == f"{own}.csv"
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: demo")]
    assert len(said) == 1 and f"measuring into a set of its own, {own}" in said[0]
    assert sweep.run("demo", grid(2), lambda p, d: fake_outcome(), device="cpu", progress=False).already_stored == 2
    again = sweep.run("demo", grid(2), lambda p, d: fake_outcome(), device="cpu", progress=False, rerun=True)
    assert again.path.name == f"{HW}.csv" and again.measured == 2
