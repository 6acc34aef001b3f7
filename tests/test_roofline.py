"""The GEMM roofline: a quick measurement lands in the store and reads back as a per-precision limit."""

from __future__ import annotations

import pytest

from lstmstudy import hardware, results, roofline


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A quick CPU roofline (tiny matrices) in a temporary results root, and its hardware id."""
    root = tmp_path_factory.mktemp("results")
    report = roofline.measure("cpu", sizes=(64,), quick=True, root=root)
    return root, hardware.fingerprint("cpu").hardware_id, report


@pytest.mark.isa
def test_quick_measure_stores_one_row_per_precision(stored):
    root, hardware_id, report = stored
    assert report.path == results.set_path("roofline", hardware_id, root)
    assert report.measured + report.skipped == 3 and report.errors == 0
    rows = results.read_rows(report.path)
    assert {r["precision"] for r in rows} == {"fp32", "fp16", "bf16"}
    assert all(r["kernel"] == "gemm" and r["config"] == '{"n":64}' for r in rows)
    assert report.path.with_suffix(".json").exists()  # the fingerprint beside the rows


def test_limits_and_fraction(stored):
    root, hardware_id, _ = stored
    limits = roofline.limits(hardware_id, root)
    assert limits["fp32"] > 0
    assert roofline.fraction(limits["fp32"] / 4, hardware_id, "fp32", root) == pytest.approx(0.25)
    assert roofline.limits("cpu-no-such-machine-1t", root) == {}
    assert roofline.fraction(1e9, "cpu-no-such-machine-1t", "fp32", root) is None


def test_measure_again_skips_what_is_stored(stored):
    root, _, _ = stored
    again = roofline.measure("cpu", sizes=(64,), quick=True, root=root)
    assert again.already_stored == 3 and again.measured == 0
