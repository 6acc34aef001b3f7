"""A model on paper of data parallel and pipelined (model parallel) LSTM training: what to expect before
measuring. Claim 7's page (`notebooks/07_parallel_training.ipynb`) evaluates it.

One training step of a stacked LSTM (`layers` x `hidden` units, `features` inputs, a batch of `batch`
sequences of `timesteps` steps, fp32) on one device takes `one_device_s`: every layer runs `timesteps`
dependent cell updates forward and again backward, each costing a fixed latency (`cell_latency_s`: kernel
launches and synchronisation, which do not shrink with the batch) plus its arithmetic at an achieved FLOP
rate. The schemes of N devices then cost, per step:

- data parallel: each device trains batch / N sequences, then the gradients (every parameter, 4 bytes
  each) are exchanged, in one of two ways. A ring all-reduce (DDP's all-reduce, priced as a ring): each
  device sends and receives 2 (N - 1) / N of them over its link. A centralized parameter store (the
  slides' set-up: "Centralized Parameter Storage"): the workers push their gradients to one store and pull
  the new weights back, so the store's link carries 2 (N - 1) times them (`parameter_server_bytes`). No
  overlap of the exchange with the backward pass is assumed (DDP overlaps bucket by bucket, so this is an
  upper bound on the step time).
- pipeline (GPipe, `torch.distributed.pipelining.ScheduleGPipe`): the layers are split into S = N stages of
  layers / N layers, the batch into M micro-batches; a micro-batch's activations (batch / M x timesteps x
  hidden x 4 bytes) cross each stage boundary forward and their gradients backward. The schedule takes
  M + S - 1 slots of one micro-batch's stage time: the bubble, idle, is (S - 1) / (M + S - 1) of it.

The cell latency is what makes neither scheme scale as the arithmetic would: splitting the batch (data
parallel) or the layers into micro-batches (pipeline) does not shrink it. Every assumption is a named field
with its source, or marked as ours (`Link.source`, `Device.source`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from lstmstudy.errors import ParameterError

FP32_BYTES = 4
#: a training step's arithmetic over the forward pass's: backward computes the gradients of the inputs and
#: of the weights, each about as much as the forward pass
TRAIN_OVER_FORWARD = 3


@dataclass(frozen=True)
class Link:
    """How devices exchange data: bandwidth per direction per device in bytes/s, and a per-message latency."""

    name: str
    bandwidth: float
    latency_s: float
    source: str


@dataclass(frozen=True)
class Device:
    """A device's achieved fp32 rate on LSTM arithmetic, and the fixed cost of one cell update (forward and
    backward together) that does not shrink with the batch."""

    name: str
    achieved_flops: float
    cell_latency_s: float
    source: str


@dataclass(frozen=True)
class Model:
    """The stacked LSTM and the step's sizes."""

    layers: int
    hidden: int
    features: int
    batch: int
    timesteps: int

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ParameterError(f"Model.{name} must be a positive integer, got {value!r}")

    def layer_parameters(self, layer: int) -> int:
        """An `nn.LSTM` layer's parameters: w_ih (4H x I), w_hh (4H x H) and two biases (4H each)."""
        inputs = self.features if layer == 0 else self.hidden
        return 4 * self.hidden * (inputs + self.hidden) + 8 * self.hidden

    @property
    def parameters(self) -> int:
        """Every LSTM layer's parameters and the linear head's (hidden -> features) that the loss reads."""
        head = self.hidden * self.features + self.features
        return sum(self.layer_parameters(i) for i in range(self.layers)) + head

    @property
    def train_flops(self) -> float:
        """Multiply-adds x 2 of one training step: each cell update multiplies (I + H) inputs by 4H weights."""
        forward = sum(2 * (self.layer_parameters(i) - 8 * self.hidden) for i in range(self.layers))
        return TRAIN_OVER_FORWARD * forward * self.batch * self.timesteps


def one_device_s(model: Model, device: Device, *, batch: int | None = None, layers: int | None = None) -> float:
    """One training step on one device: `layers` x `timesteps` cell updates, each a fixed latency plus its
    arithmetic (the step's FLOPs in proportion to the layers and the batch)."""
    batch = model.batch if batch is None else batch
    layers = model.layers if layers is None else layers
    flops = model.train_flops * (batch / model.batch) * (layers / model.layers)
    return layers * model.timesteps * device.cell_latency_s + flops / device.achieved_flops


def ring_allreduce_bytes(nbytes: float, devices: int) -> float:
    """What each device's link carries in a ring all-reduce of `nbytes`: 2 (N - 1) messages of nbytes / N
    (reduce-scatter, then all-gather), each sent while another arrives."""
    return 2 * (devices - 1) * nbytes / devices


def parameter_server_bytes(nbytes: float, devices: int) -> float:
    """What a centralized parameter store's link carries when N workers exchange `nbytes` of gradients:
    2 (N - 1) messages of nbytes, one after another.

    Assumed: the store sits on one of the N devices, so its own worker's gradients and weights never cross a
    link; each of the other N - 1 workers pushes its gradients over the store's link, then (synchronous SGD:
    no worker pulls before the last push is summed) pulls the updated weights back over it. That link is the
    bottleneck and the workers' links idle meanwhile. It is the cheapest place for a central store, so the
    model does not overstate its cost: a store in host memory, apart from the workers, adds a push and a pull
    (2 N messages). The slides' data parallel slide ("DP 101: Data is the primitive") reads "Centralized
    Parameter Storage" and does not say where the store sits.
    """
    return 2 * (devices - 1) * nbytes


#: where `parameter_server_bytes` puts the store, stated as `Link.source` and `Device.source` state theirs
STORE_SOURCE = ("assumption: on one of the N devices. The slides' data parallel slide reads "
                '"Centralized Parameter Storage" without saying where it sits; on a worker it is cheapest (a store '
                "in host memory adds a push and a pull), so the model does not overstate its cost")

#: data parallel's two ways to exchange the gradients, by the name the page gives the scheme
RING, STORE = "data parallel, ring all-reduce", "data parallel, parameter server"
EXCHANGES = {RING: ring_allreduce_bytes, STORE: parameter_server_bytes}


def exchange_s(scheme: str, nbytes: float, devices: int, link: Link) -> float:
    """Data parallel's exchange of `nbytes` of gradients by `scheme` (one of `EXCHANGES`): both take
    2 (N - 1) messages, one after another, each a latency, and the busiest link's bytes at its bandwidth."""
    return 2 * (devices - 1) * link.latency_s + EXCHANGES[scheme](nbytes, devices) / link.bandwidth


def bubble(stages: int, micro_batches: int) -> float:
    """GPipe's idle share of a step: (S - 1) / (M + S - 1)."""
    return (stages - 1) / (micro_batches + stages - 1)


@dataclass(frozen=True)
class Estimate:
    """One scheme on N devices: its step time, split into compute and communication, the bytes its busiest
    link carries in a step (`EXCHANGES`; a pipeline's one stage boundary, both ways), and its speed-up."""

    scheme: str
    devices: int
    step_s: float
    compute_s: float
    comm_s: float
    bytes_per_step: float
    speedup: float
    bubble: float = 0.0


def data_parallel(model: Model, device: Device, link: Link, devices: int, scheme: str = RING) -> Estimate:
    """Data parallel on N devices: batch / N each, then the gradients exchanged by `scheme`, one of
    `EXCHANGES` (no overlap assumed)."""
    if model.batch % devices:
        raise ParameterError(f"batch {model.batch} does not split over {devices} devices")
    compute = one_device_s(model, device, batch=model.batch // devices)
    nbytes = model.parameters * FP32_BYTES
    comm = exchange_s(scheme, nbytes, devices, link)
    return Estimate(scheme, devices, compute + comm, compute, comm, EXCHANGES[scheme](nbytes, devices),
                    one_device_s(model, device) / (compute + comm))


def pipeline(model: Model, device: Device, link: Link, devices: int, micro_batches: int) -> Estimate:
    """GPipe over N stages of layers / N layers and M micro-batches: M + S - 1 slots of one stage's
    micro-batch, each its compute and the send of its activations (forward) and their gradients (backward)."""
    if model.layers % devices or model.batch % micro_batches:
        raise ParameterError(f"{model.layers} layers and a batch of {model.batch} must split into {devices} stages "
                             f"and {micro_batches} micro-batches")
    stage = one_device_s(model, device, batch=model.batch // micro_batches, layers=model.layers // devices)
    activation = model.batch // micro_batches * model.timesteps * model.hidden * FP32_BYTES
    send = 2 * (link.latency_s + activation / link.bandwidth) if devices > 1 else 0.0
    slots = micro_batches + devices - 1
    step = slots * (stage + send)
    return Estimate("pipeline", devices, step, slots * stage, slots * send, 2 * activation * micro_batches,
                    one_device_s(model, device) / step, bubble(devices, micro_batches))


@dataclass(frozen=True)
class Setting:
    """A machine to evaluate the model for: its device, its link, and how many devices it has."""

    name: str
    device: Device
    link: Link
    max_devices: int


#: The links. Cited figures are the vendors' per-direction peaks; what a collective achieves on them is ours.
PCIE3_HOST = Link("PCIe 3.0 x16 through the host", 6e9, 20e-6,
                  "assumption: half of PCIe 3.0 x16's 15.75 GB/s per direction, since GeForce cards of 2014 had no "
                  "peer-to-peer path and every transfer was staged through host memory")
PCIE5 = Link("PCIe 5.0 x16", 50e9, 10e-6,
             "assumption: about 80% of PCIe 5.0 x16's 63 GB/s per direction (the PCI-SIG figure)")
NVLINK4 = Link("NVLink 4 (H100 SXM, NVSwitch)", 360e9, 5e-6,
               "assumption: about 80% of NVIDIA's 450 GB/s per direction (900 GB/s bidirectional per H100 SXM)")

GTX750 = Device("GTX 750", 0.2e12, 60e-6,
                "assumption: 20% of the GTX 750's 1.04 TFLOPS fp32 peak (512 cores at 1020 MHz); 60 us per cell "
                "update forward and backward (kernel launches of a 2016 framework)")
H100 = Device("H100 SXM", 13e12, 30e-6,
              "assumption: 20% of the H100 SXM's 67 TFLOPS fp32 (no tensor cores: the study times IEEE fp32); "
              "30 us per cell update forward and backward (a few kernel launches each way)")

SETTINGS = (Setting("the slides: 4 x GTX 750, PCIe through the host", GTX750, PCIE3_HOST, 4),
            Setting("one H100 node: 8 x H100 SXM, NVLink", H100, NVLINK4, 8),
            Setting("H100 over PCIe 5.0", H100, PCIE5, 8))


def estimates(model: Model, setting: Setting, micro_batches: int) -> list[Estimate]:
    """Every scheme (data parallel by both exchanges, the pipeline) on 2, 4, ... up to the setting's devices
    (the powers of two that split the model)."""
    out = [Estimate("one device", 1, one_device_s(model, setting.device), one_device_s(model, setting.device), 0.0,
                    0.0, 1.0)]
    devices = 2
    while devices <= setting.max_devices:
        if not model.layers % devices and not model.batch % devices:
            out += [*(data_parallel(model, setting.device, setting.link, devices, scheme) for scheme in EXCHANGES),
                    pipeline(model, setting.device, setting.link, devices, micro_batches)]
        devices *= 2
    return out


#: what starts the name of every panel of the model's tables: they are modelled, never measured
MODELLED = "modelled: "


def modelled(value: float, unit: str) -> str:
    """A figure of the model as a page prints it, marked "(modelled)" so that, glued anywhere, it never reads as
    measured: `unit` is "x" (a speed-up), "ms" or "%" (a share of the step)."""
    text = {"x": f"{value:.2f}x", "ms": f"{value:.1f} ms", "%": f"{value:.0%}"}[unit]
    return f"{text} (modelled)"


def table(model: Model, micro_batches: int) -> pd.DataFrame:
    """Every scheme's modelled step time, its communication, the bytes its busiest link carries per step and
    the speed-up over one device, for every setting of `SETTINGS`. Each panel's name starts "modelled:"."""
    return pd.DataFrame([{"panel": f"{MODELLED}{setting.name}", "scheme": e.scheme, "devices": e.devices,
                          "step_ms": e.step_s * 1e3, "comm_ms": e.comm_s * 1e3, "MB_per_step": e.bytes_per_step / 1e6,
                          "bubble": e.bubble, "speedup": e.speedup}
                         for setting in SETTINGS for e in estimates(model, setting, micro_batches)])


def assumptions() -> pd.DataFrame:
    """Every device and link figure the model uses, and where its parameter store sits, with its source or the
    word 'assumption'."""
    rows = []
    for setting in SETTINGS:
        rows.append({"setting": setting.name, "what": f"device: {setting.device.name}",
                     "figure": f"{setting.device.achieved_flops / 1e12:g} TFLOP/s achieved, "
                               f"{setting.device.cell_latency_s * 1e6:g} us per cell update",
                     "source": setting.device.source})
        rows.append({"setting": setting.name, "what": f"link: {setting.link.name}",
                     "figure": f"{setting.link.bandwidth / 1e9:g} GB/s, {setting.link.latency_s * 1e6:g} us",
                     "source": setting.link.source})
    rows.append({"setting": "every setting", "what": "parameter store (data parallel)",
                 "figure": "2 (N - 1) x the gradient bytes over its link per step", "source": STORE_SOURCE})
    return pd.DataFrame(rows).drop_duplicates(subset=["what", "figure"])
