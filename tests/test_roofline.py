"""The hardware limit: a quick GEMM measurement lands in the store; the limit is the best GEMM, best-of, unless a
stored row of the set beat it, and then that row sets it and says so: no share is ever above 100%."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from lstmstudy import contract, hardware, results, roofline, sweep
from lstmstudy.shapes import LSTMShape
from lstmstudy.timing import Measurement

HARDWARE_ID = hardware.fingerprint("cpu").hardware_id


def store_row(root: Path, claim: str, point: contract.Point, flops: float, samples: tuple[float, ...]) -> dict:
    """Store one row for `point` as a sweep would (`sweep.make_row`), with the given FLOP count and samples."""
    measured = contract.PointResult(Measurement(samples=samples, warmup=0, threads=torch.get_num_threads(),
                                                sync="none"), flops=flops)
    row = sweep.make_row(claim, point, torch.device("cpu"), hardware.fingerprint("cpu"), outcome=measured)
    results.append(claim, row["hardware_id"], [row], root)
    return row


LSTM = contract.Point("torch.fused", LSTMShape(batch=64, timesteps=100, features=128, hidden=256))


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A quick CPU roofline (tiny matrices) in a temporary results root, and its hardware id."""
    root = tmp_path_factory.mktemp("results")
    report = roofline.measure("cpu", sizes=(64,), quick=True, root=root)
    return root, HARDWARE_ID, report


@pytest.mark.isa
def test_quick_measure_stores_one_row_per_precision(stored):
    root, hardware_id, report = stored
    assert report.path == results.set_path("roofline", hardware_id, root)
    assert report.measured + report.skipped == 3 and report.errors == 0
    rows = results.read_rows(report.path)
    assert {r["precision"] for r in rows} == {"fp32", "fp16", "bf16"}
    assert all(r["kernel"] == "gemm" and r["config"] == '{"n":64}' for r in rows)
    assert report.path.with_suffix(".json").exists()  # the fingerprint beside the rows


def test_limits_of_a_measured_gemm(stored):
    root, hardware_id, _ = stored
    limit = roofline.limits(hardware_id, root)["fp32"]
    assert limit.flops > 0 and limit.gemm_bound and limit.by == "GEMM n=64"
    assert limit.share(limit.flops / 4) == pytest.approx(0.25)
    assert roofline.limits("cpu-no-such-machine-1t", root) == {}


def test_measure_again_skips_what_is_stored(stored):
    root, _, _ = stored
    again = roofline.measure("cpu", sizes=(64,), quick=True, root=root)
    assert again.already_stored == 3 and again.measured == 0


def test_the_gemm_peak_is_its_fastest_sample_over_sizes(tmp_path):
    store_row(tmp_path, "roofline", roofline.gemm_point(256, "fp32"), 1e9, (0.02, 0.01, 0.03))  # median 50 GFLOP/s
    store_row(tmp_path, "roofline", roofline.gemm_point(512, "fp32"), 8e9, (0.1, 0.1, 0.1))
    limit = roofline.limits(HARDWARE_ID, tmp_path)["fp32"]
    assert limit.flops == pytest.approx(1e11) and limit.by == "GEMM n=256"


def test_a_row_below_the_gemm_leaves_the_gemm_as_the_limit(tmp_path):
    store_row(tmp_path, "roofline", roofline.gemm_point(512, "fp32"), 1e9, (0.01, 0.012))  # peak 100 GFLOP/s
    row = store_row(tmp_path, "bucketing", LSTM, 0.99e9, (0.0100, 0.0101))  # peak 99 GFLOP/s
    limit = roofline.limits(HARDWARE_ID, tmp_path)["fp32"]
    assert limit.gemm_bound and limit.flops == pytest.approx(1e11) and limit.by == "GEMM n=512"
    assert limit.share(row["achieved_flops"]) == pytest.approx(row["achieved_flops"] / 1e11)
    assert "fp16" not in roofline.limits(HARDWARE_ID, tmp_path)  # no GEMM stored: no limit


def test_a_row_above_the_gemm_sets_the_limit_and_says_so(tmp_path):
    store_row(tmp_path, "roofline", roofline.gemm_point(512, "fp32"), 1e9, (0.01, 0.012))  # peak 100 GFLOP/s
    row = store_row(tmp_path, "bucketing", LSTM, 2e9, (0.010, 0.011))  # median 190, peak 200 GFLOP/s
    limit = roofline.limits(HARDWARE_ID, tmp_path)["fp32"]
    assert not limit.gemm_bound and limit.flops == pytest.approx(2e11) and limit.gemm_flops == pytest.approx(1e11)
    assert limit.by == "bucketing torch.fused inference b64 t100 f128 h256"
    assert limit.describe() == "bucketing torch.fused inference b64 t100 f128 h256: 200 GFLOP/s > GEMM 100"
    assert row["achieved_flops"] > limit.gemm_flops and limit.share(row["achieved_flops"]) <= 1.0
    with pytest.raises(ValueError, match="exceeds the limit"):  # a figure above every stored row is refused
        limit.share(2.5e11)
