"""One process of a claim 7 run, started by `torchrun` (`lstmstudy.parallel.launch`), one per device.

    torchrun --standalone --nproc-per-node N -m lstmstudy.parallel.worker SPEC.json

It joins the process group (NCCL on GPUs, gloo on a CPU; with a timeout, so a lost peer ends the run
rather than hanging it), checks that data parallel and the pipeline compute what one device computes
(`check`), then times every point of the spec in interleaved rounds (`time_points`): each round runs the
points in a shuffled order, every process waits at a barrier before and after each point, and rank 0
times the pass in between. A point on k devices runs on ranks 0..k-1 while the others wait. Rank 0 writes
`result.json` into the spec's folder; a process that fails writes `error-<rank>.txt` there first.

It imports torch, numpy and `lstmstudy.data`: never TensorFlow or Keras (`result.json` says so).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from lstmstudy.backends import ieee_fp32
from lstmstudy.parallel.batching import timed_plan
from lstmstudy.parallel.model import Batch, batches, build
from lstmstudy.parallel.schemes import DataParallel, Pipeline, SingleDevice
from lstmstudy.timing import sync_for

#: what a line of progress starts with, for the launcher to count rounds
PROGRESS = "lstmstudy-round"
SCHEMES = {"single": SingleDevice, "ddp": DataParallel, "pipeline": Pipeline}


def trainer(scheme: str, spec: dict, device: torch.device, group: dist.ProcessGroup | None):
    """A fresh model (the spec's seed) trained by `scheme` on `device` within `group`."""
    model = build(spec["features"], spec["hidden"], spec["layers"], spec["seed"])
    if scheme == "single":
        return SingleDevice(model, device)
    if scheme == "ddp":
        return DataParallel(model, device, group)
    return Pipeline(model, device, group, spec["micro_batches"])


def _gathered(gradients: dict[str, torch.Tensor], group: dist.ProcessGroup) -> dict[str, torch.Tensor]:
    """Every process's gradients merged on rank 0 (a pipeline stage holds only its own layers')."""
    parts: list[dict | None] = [None] * dist.get_world_size(group)
    dist.all_gather_object(parts, gradients, group=group)
    return {name: grad for part in parts for name, grad in part.items()}


def check(spec: dict, batch: Batch, device: torch.device, group: dist.ProcessGroup) -> dict:
    """Two SGD steps on `batch` by each scheme: the largest relative difference of data parallel's and the
    pipeline's losses and last gradients from one device's (every process gets the same figures)."""
    rank = dist.get_rank()
    batch = batch.to(device)
    reference = None
    if rank == 0:
        single = trainer("single", spec, device, None)
        reference = ([float(single.step(batch)) for _ in range(2)], single.gradients())
    reference = _broadcast(reference)
    out = {}
    for scheme in ("ddp", "pipeline"):
        run = trainer(scheme, spec, device, group)
        shares = torch.stack([run.step(batch) for _ in range(2)])
        dist.all_reduce(shares, group=group)  # a pipeline's loss is on its last stage, DDP's in shares
        grads = _gathered(run.gradients(), group)
        losses, want = shares.cpu().tolist(), reference[0]
        scale = max(float(g.abs().max()) for g in reference[1].values())
        out[scheme] = {
            "loss_rel_diff": max(abs(a - b) / abs(b) for a, b in zip(losses, want)),
            "grad_rel_diff": max(float((grads[n] - g).abs().max()) for n, g in reference[1].items()) / scale,
            "parameters": len(grads), "expected_parameters": len(reference[1]),
        }
    return out


def _broadcast(value: object) -> object:
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def time_points(spec: dict, device: torch.device, groups: dict[int, dist.ProcessGroup]) -> dict[str, list[float]]:
    """Seconds per pass over each point's batches, one per timed round, on rank 0 (after `warmup` rounds)."""
    rank = dist.get_rank()
    mine = {}
    for point in spec["points"]:
        if rank < point["devices"]:
            group = groups.get(point["devices"])
            mine[point["id"]] = (trainer(point["scheme"], spec, device, group),
                                 [b.to(device) for b in batches(timed_plan(point["config"]), spec["features"],
                                                                spec["seed"])])
    samples: dict[str, list[float]] = {p["id"]: [] for p in spec["points"]}
    device_sync = sync_for(device)  # None on a CPU, where every op has finished when it returns
    order = np.random.default_rng(spec["round_seed"])
    total = spec["warmup"] + spec["rounds"]
    for round_index in range(total):
        for index in order.permutation(len(spec["points"])):  # the same order on every process: same seed
            point = spec["points"][index]
            dist.barrier()
            start = time.perf_counter()
            if point["id"] in mine:
                run, data = mine[point["id"]]
                for batch in data:
                    run.step(batch)
                if device_sync:
                    device_sync()
            dist.barrier()
            if round_index >= spec["warmup"]:
                samples[point["id"]].append(time.perf_counter() - start)
        if rank == 0:
            print(f"{PROGRESS} {round_index + 1}/{total}", flush=True)
    return samples


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    folder = Path(spec["out"])
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    cuda = spec["device_kind"] == "cuda"
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(seconds=spec["timeout_s"]),
                            device_id=device if cuda else None)
    try:
        with ieee_fp32(device):  # IEEE fp32, as every other step of the study
            world = dist.get_world_size()
            # every process creates every group, in the same order, members or not (torch.distributed's rule)
            groups = {k: dist.new_group(list(range(k)))
                      for k in sorted({p["devices"] for p in spec["points"]}) if k > 1}
            result: dict = {"world_size": world, "threads": torch.get_num_threads()}
            if spec["check"] and world > 1:
                first = batches(timed_plan(spec["points"][0]["config"]), spec["features"], spec["seed"])[0]
                result["check"] = check(spec, first, device, groups.get(world) or dist.group.WORLD)
            result["samples"] = time_points(spec, device, groups)
        result["imported"] = sorted(m for m in ("tensorflow", "keras") if m in sys.modules)
        if rank == 0:
            (folder / "result.json").write_text(json.dumps(result))
    except Exception as exc:
        summary = " ".join(str(exc).split())[:400]  # one line, whatever the message's layout
        (folder / f"error-{rank}.txt").write_text(f"{type(exc).__name__}: {summary}\n{traceback.format_exc()}")
        raise
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
