"""The book's shared figure helpers (`lstmstudy.plots`): one colour per kernel everywhere, and the landing figure."""

from __future__ import annotations

from lstmstudy import plots
from lstmstudy.kernels import KERNELS


def test_every_kernel_has_its_own_colour_and_a_label_takes_its_kernels():
    names = [spec.name for spec in KERNELS] + [n for n in plots.EXTRA_KERNELS if n not in {s.name for s in KERNELS}]
    colours = [plots.kernel_colour(name) for name in names]
    assert len(set(colours)) == len(names)  # no two kernels share a colour
    assert (0.5, 0.5, 0.5) not in colours  # grey is kept for a name the registry does not list
    assert plots.kernel_colour("keras.relu (torch)") == plots.kernel_colour("keras.relu")
    assert plots.kernel_colour("torch.fused+autocast") != plots.kernel_colour("torch.fused")  # the longest name wins
    assert plots.kernel_colour("no.such_kernel") == (0.5, 0.5, 0.5)
    assert plots.kernel_palette(["torch.fused", "gemm"]) == {"torch.fused": plots.kernel_colour("torch.fused"),
                                                             "gemm": plots.kernel_colour("gemm")}
