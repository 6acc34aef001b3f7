"""Claim 7's machinery: the cost model on hand-checked numbers, the pipeline's stages against the whole model,
and one real 2-process gloo run in which DDP and the pipeline must match one device's losses and gradients."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest
import torch

from lstmstudy.errors import ParameterError
from lstmstudy.parallel import cost, launch
from lstmstudy.parallel.batching import full_batches, timed_plan
from lstmstudy.parallel.model import Stage, batches, build, masked_sse, stage_layers

LINK = cost.Link("test", bandwidth=1e9, latency_s=0.0, source="test")
DEVICE = cost.Device("test", achieved_flops=1e12, cell_latency_s=0.0, source="test")


def test_parameters_and_flops_by_hand():
    model = cost.Model(layers=2, hidden=4, features=3, batch=2, timesteps=5)
    assert model.layer_parameters(0) == 4 * 4 * (3 + 4) + 8 * 4 == 144  # w_ih, w_hh and two biases
    assert model.layer_parameters(1) == 4 * 4 * (4 + 4) + 8 * 4 == 160
    assert model.parameters == 144 + 160 + 4 * 3 + 3
    assert model.train_flops == 3 * 2 * (112 + 128) * 2 * 5


def test_ring_allreduce_and_bubble_by_hand():
    assert cost.exchange_s(cost.RING, 8e9, 4, LINK) == pytest.approx(2 * 3 / 4 * 8)  # 2 (N-1)/N of the bytes each
    assert cost.exchange_s(cost.RING, 8e9, 1, LINK) == 0.0
    assert cost.bubble(4, 4) == pytest.approx(3 / 7) and cost.bubble(1, 8) == 0.0


@pytest.mark.parametrize("devices", [3, 4, 8])
def test_a_parameter_server_carries_2_n_minus_1_times_the_bytes_more_than_a_ring(devices):
    nbytes = 8e9
    assert cost.parameter_server_bytes(nbytes, devices) == 2 * (devices - 1) * nbytes
    assert cost.ring_allreduce_bytes(nbytes, devices) == pytest.approx(2 * (devices - 1) / devices * nbytes)
    store, ring = (cost.exchange_s(s, nbytes, devices, LINK) for s in (cost.STORE, cost.RING))
    assert store == pytest.approx(2 * (devices - 1) * 8) and store > ring
    assert store / ring == pytest.approx(devices)  # the store's link carries N times a ring link's bytes
    slow = cost.Link("latency", bandwidth=1e9, latency_s=1e-3, source="test")  # both send 2 (N - 1) messages
    assert cost.exchange_s(cost.STORE, 0.0, devices, slow) == cost.exchange_s(cost.RING, 0.0, devices, slow)
    assert cost.exchange_s(cost.STORE, nbytes, 1, LINK) == 0.0


def test_data_parallel_prices_each_exchange_and_reports_its_link_bytes():
    model = cost.Model(layers=4, hidden=8, features=8, batch=8, timesteps=10)
    ring, store = (cost.data_parallel(model, DEVICE, LINK, 4, s) for s in (cost.RING, cost.STORE))
    nbytes = model.parameters * cost.FP32_BYTES
    assert (ring.scheme, store.scheme) == (cost.RING, cost.STORE) and ring.compute_s == store.compute_s
    assert store.bytes_per_step == 6 * nbytes and ring.bytes_per_step == pytest.approx(6 / 4 * nbytes)
    assert store.comm_s == pytest.approx(6 * nbytes / LINK.bandwidth) and store.speedup < ring.speedup
    setting = cost.Setting("test", DEVICE, LINK, 4)
    schemes = [(e.scheme, e.devices) for e in cost.estimates(model, setting, 2)]
    assert schemes == [("one device", 1), (cost.RING, 2), (cost.STORE, 2), ("pipeline", 2), (cost.RING, 4),
                       (cost.STORE, 4), ("pipeline", 4)]


def test_without_latency_or_communication_both_schemes_follow_the_arithmetic():
    model = cost.Model(layers=4, hidden=8, features=8, batch=8, timesteps=10)
    fast = cost.Link("free", bandwidth=1e30, latency_s=0.0, source="test")
    assert cost.data_parallel(model, DEVICE, fast, 4).speedup == pytest.approx(4.0)
    # GPipe: M + S - 1 = 7 slots of 1/16 of the work instead of 16 of them
    assert cost.pipeline(model, DEVICE, fast, 4, 4).speedup == pytest.approx(16 / 7)


def test_a_cell_latency_is_not_shrunk_by_splitting_the_batch():
    model = cost.Model(layers=2, hidden=8, features=8, batch=8, timesteps=10)
    slow = cost.Device("latency only", achieved_flops=1e30, cell_latency_s=1e-3, source="test")
    assert cost.one_device_s(model, slow) == pytest.approx(2 * 10 * 1e-3)
    assert cost.data_parallel(model, slow, LINK, 2).compute_s == pytest.approx(cost.one_device_s(model, slow))


def test_a_model_that_does_not_split_is_a_parameter_error():
    with pytest.raises(ParameterError, match="must split into 3 stages"):
        cost.pipeline(cost.Model(layers=4, hidden=8, features=8, batch=8, timesteps=4), DEVICE, LINK, 3, 2)


def test_stages_cut_the_layers_evenly():
    assert stage_layers(8, 4) == [(0, 2), (2, 2), (4, 2), (6, 2)]
    assert stage_layers(5, 2) == [(0, 3), (3, 2)]
    with pytest.raises(ParameterError, match="needs at least 3 layers"):
        stage_layers(2, 3)


def test_the_stages_in_a_row_compute_the_whole_model():
    model = build(features=3, hidden=5, layers=3, seed=0)
    stages = [Stage(model, first, count, last=i == 1) for i, (first, count) in enumerate(stage_layers(3, 2))]
    x = torch.randn(4, 6, 3)
    torch.testing.assert_close(stages[1](stages[0](x)), model(x))
    names = {**stages[0].named_model_parameters(), **stages[1].named_model_parameters()}
    assert set(names) == {name for name, _ in model.named_parameters()}


def test_the_loss_of_the_pieces_adds_up_to_the_batch():
    plan = timed_plan({"plan": "auto_buckets", "corpus": "ptb-valid", "seed": 0, "batch_size": 8, "sample_batches": 2})
    batch = batches(plan, features=3, seed=0)[0]
    output = torch.randn_like(batch.x)
    whole = masked_sse(output, batch.target)
    parts = sum(masked_sse(output[i * 4:(i + 1) * 4], batch.shard(i, 2).target) for i in range(2))
    torch.testing.assert_close(parts, whole)


def test_full_batches_drop_only_the_short_ones():
    plan = timed_plan({"plan": "pad_to_global_max", "corpus": "ptb-valid", "seed": 0, "batch_size": 32,
                       "sample_batches": "all"})
    assert all(len(b) == 32 for b in plan.batches) and plan.n_batches == 3370 // 32
    assert full_batches(plan, 32) == plan


def _spec(**changes) -> dict:
    config = {"plan": "auto_buckets", "corpus": "ptb-valid", "seed": 0, "batch_size": 8, "sample_batches": 2}
    points = [{"id": "0", "scheme": "single", "devices": 1, "config": config},
              {"id": "1", "scheme": "ddp", "devices": 2, "config": config},
              {"id": "2", "scheme": "pipeline", "devices": 2, "config": config}]
    return {"device_kind": "cpu", "features": 4, "hidden": 8, "layers": 3, "seed": 0, "micro_batches": 2,
            "points": points, "rounds": 1, "warmup": 0, "round_seed": 1, "check": True, "timeout_s": 60, **changes}


def test_ddp_and_the_pipeline_match_one_device_on_two_gloo_processes():
    got = launch.run(_spec(), 2, timeout_s=120, progress=False)
    assert got["world_size"] == 2 and got["imported"] == []  # the workers never import TensorFlow or Keras
    for scheme in ("ddp", "pipeline"):
        found = got["check"][scheme]
        assert found["parameters"] == found["expected_parameters"] == 3 * 4 + 2  # 4 tensors a layer, the head's 2
        assert found["loss_rel_diff"] < 1e-5 and found["grad_rel_diff"] < 1e-5, found
    assert all(len(got["samples"][p]) == 1 for p in "012")


def test_a_failing_worker_is_one_line_not_a_hang():
    broken = _spec(points=[{**p, "config": {**p["config"], "corpus": "ptb-nowhere"}} for p in _spec()["points"]])
    with pytest.raises(launch.WorkerFailed, match=r"the 2-process run failed \(exit status \d+\): rank \d: "
                                                  r"ParameterError: .*ptb-nowhere") as info:
        launch.run(broken, 2, timeout_s=120, progress=False)
    assert "\n" not in str(info.value)


def test_a_terminated_run_takes_its_workers_with_it():
    """A command's time limit sends SIGTERM to the measuring process; torchrun, in a session of its own, would not
    get it, and its workers would go on holding the GPUs into the next call."""
    tag = f"lstmstudy-test-worker-{uuid.uuid4().hex}"
    script = textwrap.dedent(f"""
        import sys
        from lstmstudy.parallel import launch

        worker = "import time; time.sleep(600)  # " + {tag[:9]!r} + {tag[9:]!r}  # the tag not in this command
        launch.torchrun_command = lambda processes, spec: [sys.executable, "-c",
            f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {{worker!r}}]); time.sleep(600)"]
        print("started", flush=True)
        launch.run({{"device_kind": "cpu", "warmup": 0, "rounds": 1}}, 2, timeout_s=600, progress=False)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 60
    while not _processes(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes(tag), "the stand-in worker never started"
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=30) == 128 + signal.SIGTERM
    deadline = time.monotonic() + 10
    while _processes(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _processes(tag), "a worker outlived the terminated run"


def _processes(tag: str) -> list[int]:
    """The live processes whose command line holds `tag`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and tag in (proc / "cmdline").read_text():
                state = next(line for line in (proc / "status").read_text().splitlines() if line.startswith("State"))
                if "zombie" not in state:
                    found.append(int(proc.name))
        except (OSError, StopIteration):
            pass
    return found
