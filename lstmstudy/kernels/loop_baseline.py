"""`cudnn.loop`: claim 4's loop baseline, the vendor library's LSTM forward called DeepBench's way.

DeepBench calls cuDNN's forward from C++ with no framework between them, 100 calls queued between two syncs. This
kernel is that call, and nothing around it, for the study's timers (`timing.Queued` queues it):

- on a GPU, the C++ harness (`lstmstudy.native`: `cudnnRNNForward`, cuDNN 9, fp32 with FMA math), whose own loop
  queues the calls (`Harness.repeat`), no CUDA graph and no `nn.Module`;
- on a GPU where the harness cannot be built, loaded or started, or gives another output than `nn.LSTM`'s: ATen's
  cuDNN op, `torch._cudnn_rnn`, called directly from Python on a pre-flattened weight buffer, input and states
  held in cuDNN's (time-major) layout, under IEEE fp32; the row says so, and why (`observed_detail`'s `loop`,
  `harness`);
- on a CPU, the same: oneDNN's LSTM op, `torch.mkldnn_rnn_layer`, one call per layer and direction, on time-major
  input, the CPU analogue.

Built like a registry kernel (`built.Built`), weights from `LSTMWeights`, and checked at build time against
`nn.LSTM`'s output on the same weights (`AGREE_ATOL`); but not in the registry, so no other claim's grid holds it:
claim 4 builds it (`protocols.in_kernel.prepare`). Inference and fp32 only, as DeepBench's forward runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache, partial

import numpy as np
import torch
from torch import Tensor, nn

from lstmstudy import native
from lstmstudy.backends import ieee_fp32
from lstmstudy.errors import Skip
from lstmstudy.kernels.built import Built, LSTMWeights, make_inputs
from lstmstudy.observe import FUSED, Observation, observe
from lstmstudy.shapes import LSTMShape
from lstmstudy.timing import HeldStep, sync_for

NAME = "cudnn.loop"
DESCRIPTION = ("DeepBench's call: the vendor LSTM forward alone, from C++ on a GPU (cuDNN 9's cudnnRNNForward in a "
               "small harness; ATen's cuDNN op from Python where it cannot be built), oneDNN's op on a CPU")
#: the largest difference from nn.LSTM's output (both IEEE fp32, values in (-1, 1)) a loop baseline may show
AGREE_ATOL = 1e-4
#: `observed_detail`'s `loop`: which call ran
HARNESS, ATEN_CUDNN, ATEN_ONEDNN = "C++ harness: cudnnRNNForward", "aten::_cudnn_rnn from Python", \
    "aten::mkldnn_rnn_layer from Python"
CUDNN_LSTM = 2  # cudnnRNNMode_t's CUDNN_LSTM, what ATen's RNN ops take as `mode`


def unavailable(device: torch.device, precision: str) -> str | None:
    if precision != "fp32":
        return f"{NAME} is fp32 only (the harness computes in IEEE fp32, as the study's fp32 baseline)"
    if device.type not in FUSED:
        return f"{NAME} runs on a CUDA GPU or a CPU, not {device.type}"
    return None


def build(shape: LSTMShape, device: torch.device | str = "cpu", precision: str = "fp32", phase: str = "inference",
          weights: LSTMWeights | None = None) -> Built:
    """The loop baseline for `shape` on `device` (see the module docstring); `Skip` where it cannot run."""
    device = torch.device(device)
    if phase != "inference":
        raise Skip(f"{NAME} times the forward pass alone, as DeepBench's inference runs; not {phase}")
    if reason := unavailable(device, precision):
        raise Skip(reason)
    weights = weights or LSTMWeights.random(shape)
    reference = _reference(shape, device, weights)
    if device.type == "cpu":
        return _checked(_onednn(shape, device, weights), ATEN_ONEDNN, reference)
    try:
        return _checked(_harness(shape, device, weights), HARNESS, reference)
    except native.HarnessUnavailable as exc:
        why = str(exc)
    return _checked(_aten_cudnn(shape, device, weights, why=why), ATEN_CUDNN, reference)


class Disagrees(RuntimeError):
    """A loop baseline's output is not nn.LSTM's on the same weights: it must not be timed as the baseline."""


def _checked(k: Built, loop: str, reference: np.ndarray) -> Built:
    """`k` once its output agrees with nn.LSTM's; else the harness gives way to ATen's op (`HarnessUnavailable`) and
    ATen's op is an error row (`Disagrees`)."""
    gap = float(np.max(np.abs(k.forward() - reference)))
    if not gap <= AGREE_ATOL:
        error = f"{NAME} ({loop}): its output differs from nn.LSTM's by {gap:.3g} (allowed {AGREE_ATOL:g})"
        raise (native.HarnessUnavailable if loop == HARNESS else Disagrees)(error)
    return k


def _reference(shape: LSTMShape, device: torch.device, weights: LSTMWeights) -> np.ndarray:
    """nn.LSTM's output on the same weights and input, IEEE fp32: what every loop baseline must reproduce."""
    module = _load(nn.LSTM(shape.features, shape.hidden, num_layers=shape.layers, bidirectional=shape.bidirectional,
                           batch_first=True, device=device), weights)
    x = torch.from_numpy(make_inputs(shape)[0]).to(device)
    with torch.inference_mode(), ieee_fp32(device):
        return module(x)[0].float().cpu().numpy()


def _load(module: nn.LSTM, weights: LSTMWeights) -> nn.LSTM:
    """`weights` into `module`, flattened (on a GPU, into cuDNN's one buffer), in eval mode."""
    dirs = 2 if module.bidirectional else 1
    with torch.no_grad():
        for layer, directions in enumerate(weights.layers):
            for direction, tensors in enumerate(directions):
                for key, tensor in zip(("w_ih", "w_hh", "b_ih", "b_hh"),
                                       module.all_weights[layer * dirs + direction]):
                    tensor.copy_(torch.from_numpy(tensors[key]))
    module.flatten_parameters()
    return module.eval()


def _built(shape: LSTMShape, device: torch.device, step, output, detail: dict) -> Built:
    return Built(name=NAME, shape=shape, device=device, precision="fp32", phase="inference", step=step,
                 sync=sync_for(device), compute_dtype="float32", forward=output,
                 observe=cache(partial(_observe, step, device, detail)))


def _observe(step, device: torch.device, detail: dict) -> Observation:
    """What ran, as the registry's kernels say it (the profiler: cuDNN's kernels, or oneDNN's op), and which call."""
    seen = observe([step], device)
    return Observation(seen.kernel, {**seen.detail, **detail})


# --- on a GPU: the C++ harness ----------------------------------------------------------------------------------

class _HarnessStep:
    """The harness as a step: a call queues one forward; `repeat(n)` queues n from C++ (DeepBench's loop)."""

    def __init__(self, harness: native.Harness) -> None:
        self.harness = harness

    def __call__(self) -> None:
        self.harness.repeat(1)

    def repeat(self, calls: int) -> None:
        self.harness.repeat(calls)


def _harness(shape: LSTMShape, device: torch.device, weights: LSTMWeights) -> Built:
    lib = native.load()
    with torch.cuda.device(device):
        torch.cuda.init()  # the harness runs in torch's CUDA context (the primary one of this device)
        harness = native.Harness(lib, input_size=shape.features, hidden=shape.hidden, layers=shape.layers,
                                 bidirectional=shape.bidirectional, batch=shape.batch, timesteps=shape.timesteps)
    harness.load_weights(weights.layers)
    harness.load_input(make_inputs(shape)[0])
    step = _HarnessStep(harness)
    step()
    detail = {"loop": HARNESS, "cudnn_version": native.cudnn_version(), "math": "CUDNN_FMA_MATH"}
    return _built(shape, device, step, harness.output, detail)


# --- ATen's vendor ops, called directly from Python ---------------------------------------------------------------

def _flat_weights(shape: LSTMShape, device: torch.device, weights: LSTMWeights) -> list[Tensor]:
    """The weights as plain tensors (w_ih, w_hh, b_ih, b_hh per layer and direction), on a GPU views into cuDNN's one
    flat buffer: nn.LSTM's `flatten_parameters` only lays them out, the step never calls the module."""
    module = _load(nn.LSTM(shape.features, shape.hidden, num_layers=shape.layers, bidirectional=shape.bidirectional,
                           batch_first=True, device=device), weights)
    return [t.detach() for t in module._flat_weights]


@contextmanager
def _inference(device: torch.device) -> Iterator[None]:
    with torch.inference_mode(), ieee_fp32(device):
        yield


def _aten_cudnn(shape: LSTMShape, device: torch.device, weights: LSTMWeights, *, why: str) -> Built:
    """`torch._cudnn_rnn` on the flat weight buffer (as ATen's `_cudnn_impl` passes it), time-major input and zero
    states held in place; IEEE fp32 and inference mode held around a burst (`HeldStep`), not set in each call."""
    flat = _flat_weights(shape, device, weights)
    storage = flat[0].untyped_storage()
    if any(t.untyped_storage().data_ptr() != storage.data_ptr() for t in flat):
        raise RuntimeError(f"{NAME}: nn.LSTM did not flatten the weights into one cuDNN buffer, which "
                           f"torch._cudnn_rnn would then copy in every call")
    weight_buf = torch.empty(0, device=device).set_(storage)  # the whole buffer, as ATen's try_get_weight_buf passes
    x = torch.from_numpy(make_inputs(shape)[0]).to(device).transpose(0, 1).contiguous()
    zeros = x.new_zeros(shape.layers * shape.directions, shape.batch, shape.hidden)

    def run() -> Tensor:
        return torch._cudnn_rnn(x, flat, 4, weight_buf, zeros, zeros, CUDNN_LSTM, shape.hidden, 0, shape.layers,
                                False, 0.0, False, shape.bidirectional, [], None)[0]

    step = HeldStep(run, partial(_inference, device))
    return _built(shape, device, step, lambda: step().transpose(0, 1).float().cpu().numpy(),
                  {"loop": ATEN_CUDNN, "harness": why})


def _onednn(shape: LSTMShape, device: torch.device, weights: LSTMWeights) -> Built:
    """`torch.mkldnn_rnn_layer` per layer and direction, as ATen's `mkldnn_impl` calls it: time-major input (its
    only layout), zero states, the weights as plain tensors."""
    flat = _flat_weights(shape, device, weights)
    per = [flat[i:i + 4] for i in range(0, len(flat), 4)]  # [layer * directions + direction] -> w_ih, w_hh, b_ih, b_hh
    x = torch.from_numpy(make_inputs(shape)[0]).to(device).transpose(0, 1).contiguous()
    zeros = x.new_zeros(shape.batch, shape.hidden)

    def run() -> Tensor:
        layer_input = x
        for layer in range(shape.layers):
            outputs = [torch.mkldnn_rnn_layer(layer_input, *per[layer * shape.directions + direction], zeros, zeros,
                                              direction == 1, [], CUDNN_LSTM, shape.hidden, shape.layers, True,
                                              shape.bidirectional, False, False)[0]
                       for direction in range(shape.directions)]
            layer_input = outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=-1)
        return layer_input

    step = HeldStep(run, partial(_inference, device))
    return _built(shape, device, step, lambda: step().transpose(0, 1).float().cpu().numpy(), {"loop": ATEN_ONEDNN})
