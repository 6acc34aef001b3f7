"""The stacked LSTM that claim 7 trains three ways, its split into pipeline stages, its loss and its batches.

The model is `nn.LSTM(features, hidden, layers)` and a linear head (hidden -> features); a training step is
forward, a masked sum of squared errors against the input (padded steps are computed, as in claim 5's
`torch.padded`, but do not count in the loss), backward and one SGD update. The loss of a piece of a batch
(a DDP rank's shard, a pipeline micro-batch) is normalised by the real steps of the whole batch, so that
the pieces' gradients add up to the whole batch's: all three schemes compute the same function.
Which batches are trained is `lstmstudy.parallel.batching`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from lstmstudy import data
from lstmstudy.errors import ParameterError


class StackedLSTM(nn.Module):
    """`layers` LSTM layers and a linear head: the single-device and data-parallel model."""

    def __init__(self, features: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.lstm(x)[0])


class Stage(nn.Module):
    """Layers [first, first + count) of a `StackedLSTM` as one `nn.LSTM`, with the head on the last stage."""

    def __init__(self, model: StackedLSTM, first: int, count: int, last: bool) -> None:
        super().__init__()
        inputs = model.lstm.input_size if first == 0 else model.lstm.hidden_size
        self.first = first
        self.lstm = nn.LSTM(inputs, model.lstm.hidden_size, count, batch_first=True)
        with torch.no_grad():
            for name, param in self.lstm.named_parameters():
                param.copy_(getattr(model.lstm, global_name(name, first).removeprefix("lstm.")))
        self.head = None
        if last:  # a copy: a stage never shares tensors with the model it was cut from
            self.head = nn.Linear(model.head.in_features, model.head.out_features)
            self.head.load_state_dict(model.head.state_dict())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.lstm(x)[0]
        # batch_first output is a transposed view, and gloo sends contiguous tensors only
        return self.head(out) if self.head is not None else out.contiguous()

    def named_model_parameters(self) -> dict[str, nn.Parameter]:
        """This stage's parameters under their names in the whole `StackedLSTM` (`lstm.weight_ih_l3`)."""
        out = {global_name(name, self.first): p for name, p in self.lstm.named_parameters()}
        if self.head is not None:
            out.update({f"head.{name}": p for name, p in self.head.named_parameters()})
        return out


def global_name(name: str, first: int) -> str:
    """A stage's `nn.LSTM` parameter name (`weight_ih_l1`) as the whole model's (`lstm.weight_ih_l3`)."""
    stem, _, layer = name.rpartition("_l")
    return f"lstm.{stem}_l{first + int(layer)}"


def stage_layers(layers: int, stages: int) -> list[tuple[int, int]]:
    """(first layer, layers) of each stage: as even as possible, the earlier stages one layer more."""
    if not 1 <= stages <= layers:
        raise ParameterError(f"a pipeline of {stages} stages needs at least {stages} layers, got {layers}")
    sizes = [layers // stages + (i < layers % stages) for i in range(stages)]
    return [(sum(sizes[:i]), size) for i, size in enumerate(sizes)]


def build(features: int, hidden: int, layers: int, seed: int) -> StackedLSTM:
    """The model with weights drawn from `seed`: every process builds the same one."""
    torch.manual_seed(seed)
    return StackedLSTM(features, hidden, layers)


def masked_sse(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Sum of squared errors over the real steps, over the whole batch's normaliser.

    `target` packs what the loss needs into one tensor, since a pipeline schedule splits one target tensor
    into micro-batches: (..., features) the input to reconstruct, then a mask (1 on real steps), then the
    normaliser (the whole batch's real steps x features, repeated on every step).
    """
    wanted, mask, norm = target[..., :-2], target[..., -2:-1], target[..., -1:]
    return (((output - wanted) ** 2) * mask / norm).sum()


@dataclass(frozen=True)
class Batch:
    """One padded batch: the input (B, T, F) and the packed target `masked_sse` reads (B, T, F + 2)."""

    x: torch.Tensor
    target: torch.Tensor

    def to(self, device: torch.device) -> Batch:
        return Batch(self.x.to(device), self.target.to(device))

    def shard(self, index: int, parts: int) -> Batch:
        """The `index`-th of `parts` equal slices along the batch (a DDP rank's share)."""
        size = self.x.shape[0] // parts
        rows = slice(index * size, (index + 1) * size)
        return Batch(self.x[rows], self.target[rows])


def batches(plan: data.BatchPlan, features: int, seed: int) -> list[Batch]:
    """The plan's padded batches (`data.torch_batches`) with their packed targets, on the CPU."""
    out = []
    for x, lengths in data.torch_batches(plan.lengths, plan, features, seed):
        mask = (torch.arange(x.shape[1])[None, :] < lengths[:, None]).to(x.dtype).unsqueeze(-1)
        norm = torch.full_like(mask, float(lengths.sum()) * features)
        out.append(Batch(x, torch.cat([x, mask, norm], dim=-1)))
    return out
