"""The kernel benchmark's table: its `of limit` share never passes 100%, and its `limit` column says what set it."""

from __future__ import annotations

import pytest

from lstmstudy import roofline
from lstmstudy.claims.kernel_benchmark import NAME, table
from tests.test_roofline import HARDWARE_ID, LSTM, store_row


ABOVE = "kernels torch.fused inference b64 t100 f128 h256: 200 GFLOP/s > GEMM 100"


@pytest.mark.parametrize("flops, by", [(0.5e9, "GEMM n=512: 100 GFLOP/s"), (2e9, ABOVE)])
def test_the_share_is_of_the_limit_and_names_it(tmp_path, flops, by):
    store_row(tmp_path, "roofline", roofline.gemm_point(512, "fp32"), 1e9, (0.01, 0.012))  # peak 100 GFLOP/s
    row = store_row(tmp_path, NAME, LSTM, flops, (0.010, 0.011))
    shown = table([LSTM], HARDWARE_ID, tmp_path).iloc[0]
    assert shown["limit"] == by
    assert shown["of limit"] == pytest.approx(row["achieved_flops"] / (1e11 if flops < 1e9 else 2e11))
    assert shown["of limit"] <= 1.0
