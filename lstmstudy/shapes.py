"""The shape of one LSTM workload and the arithmetic it implies, and the sizes of the whole models timed
(a claim's grid reads them where torch is not installed; `kernels.workloads` builds the models)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from lstmstudy.errors import InvalidShape

#: Elementwise work per hidden unit per step: 3 sigmoids + 2 tanh (counted as ~4 FLOPs each), the
#: gate products c' = f*c + i*g and h = o*tanh(c) (3 mults, 1 add) and the bias adds (4 gates x 2 biases).
POINTWISE_FLOPS_PER_UNIT = 5 * 4 + 4 + 8


@dataclass(frozen=True)
class LSTMShape:
    """Sizes of an LSTM workload: batch-first input of shape (batch, timesteps, features).

    Every size must be a positive integer; `bidirectional` runs a second direction over the sequence.
    """

    batch: int
    timesteps: int
    features: int
    hidden: int
    layers: int = 1
    bidirectional: bool = False

    def __post_init__(self) -> None:
        for name in ("batch", "timesteps", "features", "hidden", "layers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidShape(f"LSTMShape.{name} must be a positive integer, got {value!r}")
        if not isinstance(self.bidirectional, bool):
            raise InvalidShape(f"LSTMShape.bidirectional must be True or False, got {self.bidirectional!r}")

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    def layer_input_size(self, layer: int) -> int:
        """Input width of `layer` (0-based): the features for the first, the previous output after."""
        return self.features if layer == 0 else self.hidden * self.directions

    def flops(self, phase: str = "inference") -> float:
        """Floating-point operations of one forward pass (`inference`) or one training step (`train`).

        Per step, per layer and direction, the four gates cost 4*H*(I+H) multiply-adds, i.e.
        8*H*(I+H) FLOPs, plus POINTWISE_FLOPS_PER_UNIT*H for the activations and state update.
        A training step is counted as 3x the forward pass (the backward pass costs two GEMMs per
        forward GEMM: gradients for the inputs and for the weights), the usual convention.
        """
        if phase not in ("inference", "train"):
            raise ValueError(f"phase must be 'inference' or 'train', got {phase!r}")
        per_step = sum(
            8 * self.hidden * (self.layer_input_size(layer) + self.hidden)
            + POINTWISE_FLOPS_PER_UNIT * self.hidden
            for layer in range(self.layers)
        )
        forward = float(per_step * self.directions * self.timesteps * self.batch)
        return forward if phase == "inference" else 3.0 * forward

    def as_dict(self) -> dict[str, int | bool]:
        return asdict(self)


#: The blog post's autoencoder: LSTM(hidden, ReLU(negative_slope=0.05)) -> Dropout -> LSTM(hidden2) ->
#: Dropout -> Dense(features), MSE, Adam(1e-3); and Keras's `imdb_bidirectional_lstm.py`: Embedding(vocab,
#: embed) -> Bidirectional(LSTM(hidden)) -> Dropout -> Dense(1, sigmoid), binary cross-entropy, Adam.
AUTOENCODER = {"hidden": 64, "hidden2": 32, "dropout": 0.2}
BILSTM = {"vocab": 20000, "embed": 128, "hidden": 64, "dropout": 0.5}
