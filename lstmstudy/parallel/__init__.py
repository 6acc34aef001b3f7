"""Claim 7's machinery: one stacked LSTM trained on one device, data parallel and pipelined, on `torch.distributed`.

- `model`: the `StackedLSTM`, its pipeline `Stage`s, the masked loss and the batches of a plan;
- `schemes`: `SingleDevice`, `DataParallel` (DDP) and `Pipeline` (`torch.distributed.pipelining`, GPipe);
- `worker`: one process of a run (the equivalence check, then the timed rounds), started by `torchrun`;
- `launch`: starts that run from `lstmstudy measure` and turns a failure into one line;
- `cost`: the model on paper of both schemes (the gradients' exchange by a ring all-reduce or a central
  parameter store, activations sent, the pipeline's bubble).

The claim itself (grid, rule, verdicts) is `lstmstudy.claims.parallel_training`.
"""
