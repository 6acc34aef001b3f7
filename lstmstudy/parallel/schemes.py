"""Three ways to train the same `StackedLSTM` on the same batches, each one SGD step per `step(batch)`:

- `SingleDevice`: the whole model and batch on one device (the baseline).
- `DataParallel`: `torch.nn.parallel.DistributedDataParallel`; each of the group's N processes trains
  its 1/N of the batch and DDP all-reduces the gradients (averaging them, which the loss undoes by a factor N).
- `Pipeline`: `torch.distributed.pipelining` with the GPipe schedule; the layers are cut into one stage
  per process (`model.stage_layers`) and the batch into micro-batches. The library fits: an LSTM stack is
  sequential, one tensor crosses each stage boundary. Its stages are built in static mode (the shapes given,
  no shape inference over the wire), one stage and schedule per batch shape, because bucketing changes the
  width from batch to batch and a stage's buffers are fixed by its shapes; the modules and the optimizer
  are shared by them all.

`step` returns this process's share of the loss as a tensor (no host sync: the timing loop syncs once per
pass); `gradients()` this process's gradients of the last step under the whole model's parameter names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from lstmstudy.parallel.model import Batch, StackedLSTM, Stage, masked_sse, stage_layers

if TYPE_CHECKING:  # imported where a pipeline is built: importing it sets torch's TORCHINDUCTOR_CACHE_DIR
    from torch.distributed.pipelining import ScheduleGPipe

#: SGD's learning rate: any value does; the step must update the weights for a second step to check that
LEARNING_RATE = 0.1


class SingleDevice:
    """The whole model and batch on one device."""

    def __init__(self, model: StackedLSTM, device: torch.device) -> None:
        self.model = model.to(device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=LEARNING_RATE)

    def step(self, batch: Batch) -> torch.Tensor:
        self.optimizer.zero_grad(set_to_none=True)
        loss = masked_sse(self.model(batch.x), batch.target)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def gradients(self) -> dict[str, torch.Tensor]:
        return {name: p.grad.detach().cpu() for name, p in self.model.named_parameters()}


class DataParallel:
    """DDP over a process group: this process trains shard `index` of `size` of every batch."""

    def __init__(self, model: StackedLSTM, device: torch.device, group: dist.ProcessGroup) -> None:
        self.index, self.size = dist.get_rank(group), dist.get_world_size(group)
        model = model.to(device)
        self.ddp = DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None,
                                           process_group=group)
        self.optimizer = torch.optim.SGD(self.ddp.parameters(), lr=LEARNING_RATE)

    def step(self, batch: Batch) -> torch.Tensor:
        shard = batch.shard(self.index, self.size)
        self.optimizer.zero_grad(set_to_none=True)
        share = masked_sse(self.ddp(shard.x), shard.target)
        (share * self.size).backward()  # DDP averages the gradients over the group; the batch's loss is their sum
        self.optimizer.step()
        return share.detach()

    def gradients(self) -> dict[str, torch.Tensor]:
        return {name: p.grad.detach().cpu() for name, p in self.ddp.module.named_parameters()}


class Pipeline:
    """GPipe over a process group: this process holds stage `index` of `size`."""

    def __init__(self, model: StackedLSTM, device: torch.device, group: dist.ProcessGroup, micro_batches: int) -> None:
        self.index, self.size = dist.get_rank(group), dist.get_world_size(group)
        self.device, self.group, self.micro_batches = device, group, micro_batches
        first, count = stage_layers(model.lstm.num_layers, self.size)[self.index]
        self.stage = Stage(model, first, count, last=self.index == self.size - 1).to(device)
        self.optimizer = torch.optim.SGD(self.stage.parameters(), lr=LEARNING_RATE)
        self.hidden, self.features = model.lstm.hidden_size, model.lstm.input_size
        self._schedules: dict[tuple[int, int], ScheduleGPipe] = {}

    def _schedule(self, batch: Batch) -> ScheduleGPipe:
        """The stage and schedule for this batch's shape, built once per shape with the shapes given."""
        from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

        rows, width = batch.x.shape[:2]
        if (rows, width) not in self._schedules:
            micro = rows // self.micro_batches
            inputs = self.features if self.index == 0 else self.hidden
            outputs = self.features if self.index == self.size - 1 else self.hidden
            # every tensor that crosses a boundary carries a gradient back, except the first stage's input
            example = torch.empty(micro, width, inputs, device=self.device, requires_grad=self.index > 0)
            stage = PipelineStage(self.stage, self.index, self.size, self.device, input_args=example,
                                  output_args=torch.empty(micro, width, outputs, device=self.device,
                                                          requires_grad=True),
                                  group=self.group)
            self._schedules[rows, width] = ScheduleGPipe(stage, self.micro_batches, loss_fn=masked_sse,
                                                         scale_grads=False)
        return self._schedules[rows, width]

    def step(self, batch: Batch) -> torch.Tensor:
        schedule = self._schedule(batch)
        self.optimizer.zero_grad(set_to_none=True)
        losses: list[torch.Tensor] = []
        if self.index == 0:
            schedule.step(batch.x)
        elif self.index == self.size - 1:
            schedule.step(target=batch.target, losses=losses)
        else:
            schedule.step()
        self.optimizer.step()
        return torch.stack(losses).sum().detach() if losses else torch.zeros((), device=self.device)

    def gradients(self) -> dict[str, torch.Tensor]:
        return {name: p.grad.detach().cpu() for name, p in self.stage.named_model_parameters().items()}
