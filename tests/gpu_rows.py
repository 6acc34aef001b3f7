"""GPU rows that say what they timed (issue 46), stored as a sweep stores them, for the tests of the pages that read
them: each row's wall time, the GPU's own work in it (`device_s`) and the clock slowdowns its group's GPU named."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lstmstudy import results


def store(root: Path, claim: str, hardware_id: str, timed: Sequence[tuple[float, float | None, Sequence[str]]]) -> None:
    """One `ok` row of `claim` per (median_s, device_s, slowdowns) in `timed`, each at its own batch size, timed in
    two rounds with a narrow interval (not noisy); a `device_s` of None stores a row as the first GPU set's are,
    without device time, timer or GPU state."""
    rows = []
    for batch, (median, device, slowdowns) in enumerate(timed, start=1):
        row = {"kernel": "torch.fused", "hardware_id": hardware_id, "device": "cuda:0", "device_kind": "cuda",
               "status": "ok", "median_s": median, "ci_low_s": 0.99 * median, "ci_high_s": 1.01 * median,
               "samples_s": [median, median], "round_sizes": [1, 1], "round_seed": 3, "batch": batch,
               "timesteps": 16, "features": 32, "hidden": 64, "layers": 1, "bidirectional": False, "config": "{}",
               "precision": "fp32", "phase": "inference"}
        if device is not None:
            row.update(timer="cuda-events", device_s=device, kernels_per_call=4.0,
                       gpu_state={"start": {"sm_mhz": 1980, "slowdowns": list(slowdowns)},
                                  "end": {"sm_mhz": 1980, "slowdowns": []}})
        rows.append(row)
    results.append(claim, hardware_id, rows, root)
