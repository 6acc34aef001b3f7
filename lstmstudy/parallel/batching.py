"""Which batches claim 7 trains: a plan of claim 5's over the real sentence lengths, its full batches only
(DDP shards and pipeline micro-batches need every batch to split evenly), then the timing sample. No torch:
the claim's grid and page read it too."""

from __future__ import annotations

from lstmstudy import data


def full_batches(plan: data.BatchPlan, batch_size: int) -> data.BatchPlan:
    """The plan without its batches of fewer than `batch_size` sentences (a corpus rarely divides evenly),
    for every scheme alike."""
    kept = [i for i, b in enumerate(plan.batches) if len(b) == batch_size]
    lengths, batches, start = [], [], 0
    for index in kept:
        lengths += [plan.lengths[i] for i in plan.batches[index]]
        batches.append(tuple(range(start, start + batch_size)))
        start += batch_size
    return data.BatchPlan(plan.name, tuple(lengths), tuple(batches), tuple(plan.widths[i] for i in kept))


def timed_plan(config: dict) -> data.BatchPlan:
    """The batches a claim 7 point trains (its `plan`, `corpus`, `seed`, `batch_size`, `sample_batches`): the
    plan's full batches, then a stratified sample of them (`data.timing_sample`) unless `sample_batches` is
    "all"."""
    plan = data.cached_plan(str(config["plan"]), data.check_corpus(config["corpus"]), int(config["seed"]),
                            int(config["batch_size"]), data.BOUNDARIES, "boundary")
    full = full_batches(plan, int(config["batch_size"]))
    return full if config["sample_batches"] == "all" else data.timing_sample(full, int(config["sample_batches"]))
