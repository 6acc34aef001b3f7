"""cuDNN's criteria as Keras 3 applies them to a layer's settings: one home for the rules, read by both explainers,
and one table of the triggers (`TRIGGER_TABLE`: the setting, the fix, claim 1's kernel, published figures).

`kernels.criteria` explains a live Keras layer (and a torch module) and `saved_config` a layer's saved config; both
describe the layer as a `KerasRecurrent` and ask `explain_keras_layer`, so a rule is written once. What needs a
live framework stays with the live explainer: which functions Keras accepts as tanh and sigmoid (by identity), a
mask's values, the machine (a GPU, cuDNN, its version). This module imports no framework and no numpy, so that
`lstmstudy explain` reads a saved model in a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata

from lstmstudy.backends import KERAS_BACKENDS
from lstmstudy.observe import MEANING, keras_loop

#: the Keras recurrent layers with a cuDNN path (`inner_loop` tries `backend.lstm`/`backend.gru`)
FUSED_LAYERS = ("LSTM", "GRU")
#: an RNN around one of these cells computes what the fused layer computes, so the fused layer is a fix
FUSED_CELLS = {"LSTMCell": "LSTM", "GRUCell": "GRU"}
#: the torch dtypes PyTorch's cuDNN RNN takes (bfloat16 only with cuDNN >= 9.13 on compute capability >= 8.0)
TORCH_CUDNN_DTYPES = ("float16", "float32", "float64", "bfloat16")

#: the first Keras whose jax backend has a cuDNN path (`jax.experimental.rnn.lstm`, LSTM only: jax has no cuDNN GRU);
#: before it, every LSTM and GRU on jax runs Keras's own loop (keras/src/backend/jax/rnn.py of each release)
JAX_CUDNN_SINCE = (3, 14)
#: the first Keras whose jax backend runs a GRU as its own `lax.scan` (reset_after, no unroll, no mask), whatever its
#: activations and bias, instead of declining it
JAX_GRU_SCAN_SINCE = (3, 15)
#: what sends a GRU from jax's own scan to Keras's loop (`keras.src.backend.jax.rnn.gru` declines it, or `inner_loop`
#: never asks); the same codes make `use_cudnn=True` raise there, except use_cudnn=False, which never asks
JAX_GRU_SCAN_DECLINES = ("use_cudnn", "recurrent_dropout", "reset_after", "unroll", "mask_jax_backend")
#: the compute dtypes jax's cuDNN LSTM refuses: jaxlib's cuDNN lowering (`jaxlib/gpu_rnn.py`) raises "Unknown output
#: type" for them (a float64 layer computes in float32 unless jax_enable_x64 is set, and the lowering takes float64)
JAX_CUDNN_REFUSES = ("float16", "bfloat16")

#: the reasons that only say the layer is not on a GPU: on a machine without one, the warning is about a GPU
LACKS_GPU = {"no_gpu", "not_on_gpu"}


@dataclass(frozen=True)
class Trigger:
    """One thing that keeps a recurrent layer off the fused kernel: the one home of everything said about it.

    `code` is the `Reason.code` the explainers give it (None for a way of writing the model that no explainer
    names, which claim 1 still times). `argument` and `value` are the layer setting that causes it, as claim 1's
    kernel `kernel` sets it to measure the cost (`kernels.KERNELS` reads them); `words` say what causes it where no
    single argument does. `published` quotes figures others published for this trigger, each with its source
    (tests check each against `sources/`).
    """

    code: str | None
    fix: str = ""
    argument: str = ""
    value: object = None
    words: str = ""
    kernel: str | None = None
    published: str = ""

    @property
    def setting(self) -> str:
        """The setting in the words claim 1's pages and the cost line use: "recurrent_dropout=0.2"."""
        return f"{self.argument}={self.value!r}" if self.argument else self.words

    @property
    def option(self) -> dict[str, object]:
        """The layer argument as a keyword: what claim 1's Keras kernel passes to keras.layers.LSTM."""
        return {self.argument: self.value} if self.argument else {}


#: what others published for Keras's generic kernel against cuDNN, whatever sent the layer there (old Keras's LSTM
#: was always generic, CuDNNLSTM the fused kernel)
GENERIC_PUBLISHED = ("15x, the Q&A (seed 001: one epoch 1012 s with keras.layers.LSTM, 69 s with CuDNNLSTM, RTX "
                     "2070); 7.8x, keras-team/keras issue 8135 (GTX 1080Ti, batch 300); 6.87x, Max Woolf's IMDb "
                     "BiLSTM logs (K80, July and November 2017)")

#: Every trigger, one row each; a new trigger is one row. The rows with a `kernel` are claim 1's comparisons, in
#: the order claim 1's pages list them.
TRIGGER_TABLE: tuple[Trigger, ...] = (
    Trigger("activation", "use activation='tanh' (the default)", "activation", "relu", kernel="keras.relu"),
    Trigger("recurrent_dropout", "set recurrent_dropout=0 and move the dropout to a Dropout layer between recurrent "
                                 "layers (or use dropout=, which cuDNN supports)",
            "recurrent_dropout", 0.2, kernel="keras.recurrent_dropout",
            published='"generally two to five times slower on GPU", Chollet (Deep Learning with Python, 2nd ed., '
                      'quoted in seed 000); ~25x for recurrent_dropout=0.1, tensorflow/tensorflow issue 38236 '
                      '(RTX 2080)'),
    Trigger("unroll", "use unroll=False (the default)", "unroll", True, kernel="keras.unroll"),
    Trigger("use_bias", "use use_bias=True (the default)", "use_bias", False, kernel="keras.no_bias"),
    Trigger("use_cudnn", "use use_cudnn='auto' (the default)", "use_cudnn", False, kernel="keras.generic",
            published=GENERIC_PUBLISHED),
    Trigger("cudnn_disabled", "set torch.backends.cudnn.enabled = True",
            words="vendor kernel disabled (cuDNN on GPU, oneDNN on CPU)", kernel="torch.native"),
    Trigger(None, words="a Python loop over nn.LSTMCell", kernel="torch.cell_loop"),
    Trigger(None, words="LeakyReLU(0.05) cell activation, Python loop", kernel="torch.custom_activation"),
    Trigger(None, words="LeakyReLU(0.05) cell under torch.compile", kernel="torch.compiled"),
    Trigger("recurrent_activation", "use recurrent_activation='sigmoid' (the default)",
            words="a recurrent_activation other than sigmoid"),
    Trigger("reset_after", "use reset_after=True (the default)", "reset_after", False),
    Trigger("mask_not_right_padded", "pad sequences at the end, not at the start: keras.utils.pad_sequences(..., "
                                     "padding='post')", words="a mask that is not right-padded"),
    Trigger("mask_fully_masked", "leave empty sequences out of the batch", words="a fully masked sequence"),
    Trigger("mask_torch_backend", "on Keras's torch backend, drop the mask (bucket sequences by length instead) or "
                                  "use the tensorflow backend", words="a mask on Keras's torch backend"),
    Trigger("mask_jax_backend", "on Keras's jax backend, drop the mask (bucket sequences by length instead) or use "
                                "the tensorflow backend", words="a mask on Keras's jax backend"),
    Trigger("jax_gru", "use an LSTM, or run the GRU on Keras's tensorflow or torch backend",
            words="a GRU on Keras's jax backend"),
    Trigger("jax_dtype", "on Keras's jax backend, compute the LSTM in float32 (dtype='float32' on the layer, under "
                         "any global policy), or use the tensorflow or torch backend for mixed precision",
            words="a float16 or bfloat16 LSTM on Keras's jax backend"),
    Trigger("keras_jax_no_cudnn", f"upgrade Keras to {'.'.join(map(str, JAX_CUDNN_SINCE))} or later",
            words="a Keras whose jax backend has no cuDNN path"),
    Trigger("layer_type", "use the fused layer of the same cell (keras.layers.LSTM for LSTMCell, keras.layers.GRU "
                          "for GRUCell) with the cell's settings", words="an RNN layer around an LSTM or GRU cell",
            published=GENERIC_PUBLISHED),
    Trigger("dtype", "cast the module and its input to float32 (or float16)", words="a dtype cuDNN does not take"),
    Trigger("empty_input", "skip empty batches", words="an empty input"),
    Trigger("no_gpu", "run on a machine with a CUDA GPU", words="no GPU"),
    Trigger("not_on_gpu", "move the module and its input to the GPU (.to('cuda'))", words="a module on the CPU"),
    Trigger("cudnn_unavailable", "install a PyTorch build with cuDNN", words="a PyTorch build without cuDNN"),
)
#: the row of each reason code
BY_CODE: dict[str, Trigger] = {row.code: row for row in TRIGGER_TABLE if row.code}
#: the row of each claim-1 kernel that times a trigger
BY_KERNEL: dict[str, Trigger] = {row.kernel: row for row in TRIGGER_TABLE if row.kernel}


@dataclass(frozen=True)
class Reason:
    """One thing that keeps a layer off the fused kernel, in a sentence a user can act on.

    `device` is True for reasons about the machine or runtime (no GPU, cuDNN disabled) rather
    than about the layer's own configuration.
    """

    code: str
    message: str
    device: bool = False


@dataclass(frozen=True)
class Explanation:
    """The kernel one recurrent layer gets here and every reason it is not the fused cuDNN kernel.

    `kernel` is a prediction in `lstmstudy.observe`'s vocabulary, so that it compares with what is
    observed: 'cudnn', 'miopen', 'onednn' (PyTorch's fused CPU LSTM), 'aten-loop' (PyTorch's own loop), or
    Keras's own loop over timesteps as `observe.keras_loop` names it ('framework-loop', 'unrolled' with
    unroll=True, 'python-op-loop' on the torch backend). `notes` add context that does not block cuDNN, such
    as why the CPU does or does not get oneDNN.
    """

    layer: str
    framework: str
    kernel: str
    fused_eligible: bool
    reasons: tuple[Reason, ...] = ()
    notes: tuple[Reason, ...] = ()
    #: a Keras layer that received a mask (from the call's input or, with `inputs`, Keras's propagation)
    masked: bool = False

    @property
    def eligible_ignoring_device(self) -> bool:
        """True when only the machine stands between this layer and cuDNN: it would get it on a GPU."""
        return all(reason.device for reason in self.reasons)

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(reason.code for reason in self.reasons)

    def __str__(self) -> str:
        lines = [f"{self.layer} [{self.framework}]: {self.kernel}"
                 + (" (fused cuDNN kernel)" if self.fused_eligible else "")]
        if self.reasons:
            lines.append("  not cuDNN because:")
            lines += [f"    - {r.message}" for r in self.reasons]
        lines += [f"  note: {n.message}" for n in self.notes]
        return "\n".join(lines)


@dataclass(frozen=True)
class KerasRecurrent:
    """What Keras's cuDNN decision reads from one recurrent layer, taken from a live layer or a saved config.

    `activation` and `recurrent_activation` are None when Keras accepts them as tanh and sigmoid, else how to
    name them in a reason: a live layer is judged by identity (`cudnn_ok` compares functions with `in`), a saved
    config by the name Keras deserialises. `compute_dtype` is the dtype policy's compute dtype ('float32').
    """

    layer_type: str
    cell: str
    use_cudnn: bool | str = "auto"
    recurrent_dropout: float = 0.0
    dropout: float = 0.0
    activation: str | None = None
    recurrent_activation: str | None = None
    unroll: bool = False
    use_bias: bool = True
    reset_after: bool = True
    implementation: int = 2
    compute_dtype: str = "float32"


MASK_TORCH_BACKEND = Reason("mask_torch_backend", "a mask is given: Keras's torch backend has no cuDNN path for "
                                                  "masked input, even right-padded")
MASK_JAX_BACKEND = Reason("mask_jax_backend", "a mask is given: Keras's jax backend has no cuDNN path for masked "
                                              "input, even right-padded")
#: the reason a mask gives on each backend where any mask blocks cuDNN (on TensorFlow its values decide)
MASK_BLOCKS = {"torch": MASK_TORCH_BACKEND, "jax": MASK_JAX_BACKEND}


def right_padded_only_note(source: str) -> Reason:
    """A fused layer that receives a mask on TensorFlow: what the mask's values must be for cuDNN to run it."""
    return Reason("mask_right_padded_only", f"{source} makes a mask that reaches this layer: cuDNN runs it only while "
                                            f"every sequence is right-padded, and keras.utils.pad_sequences pads on "
                                            f"the left unless padding='post'; on the torch and jax backends any mask "
                                            f"means the generic loop")


def keras_layer_type_reason(layer_type: str, cell: str) -> Reason | None:
    """Why a layer that is not keras.layers.LSTM or GRU never gets cuDNN in Keras, said so that the fix keeps what
    the model computes: an RNN around an LSTM or GRU cell has the fused layer as its twin; any other layer
    (SimpleRNN, ConvLSTM, a custom cell) has no fused form at all. None for LSTM and GRU."""
    if layer_type in FUSED_LAYERS:
        return None
    if cell in FUSED_CELLS:
        return Reason("layer_type", f"{layer_type}({cell}) has no cuDNN path in Keras: only keras.layers.LSTM and "
                                    f"keras.layers.GRU have one, and keras.layers.{FUSED_CELLS[cell]} computes the "
                                    f"same as this cell")
    return Reason("no_fused_form", f"{layer_type}({cell}) has no fused form: Keras sends only keras.layers.LSTM "
                                   f"and keras.layers.GRU to cuDNN, so this layer always runs Keras's own loop, and "
                                   f"no change of setting gives it one without changing what the model computes")


#: the functions of each backend's own library that its `cudnn_ok` accepts as tanh and as sigmoid, besides Keras's,
#: by their import paths (`kernels.criteria` imports them to compare by identity, as `cudnn_ok` does); jax's accepts
#: no sigmoid of jax's own
NATIVE_ACTIVATIONS: dict[str, tuple[str, str | None]] = {
    "tensorflow": ("tensorflow.tanh", "tensorflow.sigmoid"), "torch": ("torch.tanh", "torch.sigmoid"),
    "jax": ("jax.numpy.tanh", None)}


def keras_config_reasons(layer: KerasRecurrent, backend: str) -> list[Reason]:
    """The layer-configuration checks of `inner_loop` and `cudnn_ok`, in Keras's own terms."""
    natives = dict(zip(("tanh", "sigmoid"), NATIVE_ACTIVATIONS[backend]))
    reasons = []
    if layer.use_cudnn is False:
        reasons.append(Reason("use_cudnn", "use_cudnn=False turns Keras's cuDNN path off"))
    if layer.recurrent_dropout:
        reasons.append(Reason("recurrent_dropout", f"recurrent_dropout={layer.recurrent_dropout:g}: cuDNN cannot "
                                                   "drop out the recurrent state, and Keras skips cuDNN whenever it "
                                                   "is set, even in inference"))
    for setting, named, wanted in (("activation", layer.activation, "tanh"),
                                   ("recurrent_activation", layer.recurrent_activation, "sigmoid")):
        if named is not None:
            accepted = ", ".join(f"keras.{where}.{wanted}" for where in ("activations", "ops"))
            accepted += f" or {natives[wanted]}" if natives[wanted] else ""
            hint = (f" (and Keras recognises {wanted} by identity: only {accepted} qualify)"
                    if _looks_like(named, wanted) else "")
            reasons.append(Reason(setting, f"{setting} is {named}; cuDNN only implements {wanted}{hint}"))
    if layer.unroll:
        reasons.append(Reason("unroll", "unroll=True: cuDNN runs the time loop itself, so an unrolled loop "
                                        "cannot use it"))
    if not layer.use_bias:
        reasons.append(Reason("use_bias", "use_bias=False: Keras's cuDNN path needs the bias vector"))
    if layer.layer_type == "GRU" and not layer.reset_after:
        reasons.append(Reason("reset_after", "reset_after=False: cuDNN's GRU applies the reset gate after the "
                                             "recurrent matmul, which is reset_after=True (Keras's default)"))
    return reasons


def _looks_like(named: str, wanted: str) -> bool:
    """A lambda, or a function from outside Keras named like the wanted one ('numpy.tanh'; Keras's own are quoted,
    layers and objects start with 'a '): the user meant the wanted one, but Keras recognises it by identity."""
    return named == "a lambda" or (not named.startswith(("'", "a ")) and wanted in named.lower())


def keras_jax_reasons(layer: KerasRecurrent, keras_version: str | None) -> list[Reason]:
    """What keeps a layer off cuDNN on Keras's jax backend beyond the settings every backend checks: a Keras older
    than `JAX_CUDNN_SINCE` has no cuDNN path there, jax has no cuDNN GRU (Keras 3.15 runs a GRU as its own
    `lax.scan`), and its cuDNN LSTM takes float32 only. `keras_version` is the installed Keras's (`keras_since`)."""
    if not keras_since(keras_version, JAX_CUDNN_SINCE):
        since = ".".join(map(str, JAX_CUDNN_SINCE))
        return [Reason("keras_jax_no_cudnn", f"Keras {keras_version} has no cuDNN path on its jax backend (Keras "
                                             f"{since} added one, for LSTM): every LSTM and GRU runs its own loop")]
    if layer.layer_type == "GRU":
        return [Reason("jax_gru", "a GRU on Keras's jax backend: jax has a cuDNN LSTM (jax.experimental.rnn) but no "
                                  "GRU, so Keras runs the GRU as a loop XLA compiles")]
    if layer.compute_dtype in JAX_CUDNN_REFUSES:
        return [Reason("jax_dtype", f"the layer computes in {layer.compute_dtype}, which jax's cuDNN LSTM does not "
                                    f"take: a jitted step (fit, predict, evaluate) fails to compile with jaxlib's "
                                    f"'Unknown output type {layer.compute_dtype}', outside Keras's fallback, and an "
                                    f"eager call falls back to Keras's loop (read from jaxlib's code, not yet run on "
                                    f"a GPU)")]
    return []


def keras_since(version: str | None, since: tuple[int, int]) -> bool:
    """Whether the Keras of `version` ('3.15.1') is release `since` or later. None (no Keras installed, as where
    `lstmstudy explain` reads a config) is taken as a current Keras: the rules of the newest one are the answer."""
    release = tuple(int(part) for part in version.split(".")[:2] if part.isdigit()) if version else ()
    return not release or release >= since


def runs_own_scan(backend: str, layer_type: str, keras_version: str | None) -> bool:
    """Whether the backend's recurrent function runs this layer type itself without cuDNN: jax's GRU scan (Keras
    3.15+). It never calls the cell, so a watch that takes "the cell was not called" for cuDNN must ask this."""
    return backend == "jax" and layer_type == "GRU" and keras_since(keras_version, JAX_GRU_SCAN_SINCE)


def installed_keras() -> str | None:
    """The version of the Keras installed here, read from its metadata (Keras is not imported); None without one."""
    try:
        return metadata.version("keras")
    except metadata.PackageNotFoundError:
        return None


def torch_cudnn_dtype_reason(dtype: str) -> Reason | None:
    """PyTorch's `use_cudnn(input)` dtype check, by the dtype's name ('float32'); None when cuDNN takes it."""
    if dtype in TORCH_CUDNN_DTYPES:
        return None
    return Reason("dtype", f"dtype is torch.{dtype}; PyTorch's cuDNN RNN takes float16, float32, float64 "
                           "(or bfloat16 on newer cuDNN and GPUs)")


def keras_dropout_bug_note(layer: KerasRecurrent) -> Reason | None:
    """A Keras 3 bug on the way to cuDNN: with implementation=1 and dropout, training calls fail.

    `inner_loop` builds the input-dropout mask for its cuDNN branch before asking the backend, and
    with implementation=1 the cell returns one mask per gate (a list), which it cannot broadcast.
    """
    if (layer.layer_type in FUSED_LAYERS and layer.use_cudnn in ("auto", True) and not layer.recurrent_dropout
            and layer.dropout and layer.implementation == 1):
        return Reason("keras_dropout_bug", "implementation=1 with dropout > 0: training calls fail in Keras "
                                           "(seen in 3.15) whatever the device, because its cuDNN branch cannot "
                                           "broadcast the per-gate dropout masks; use implementation=2 or "
                                           "use_cudnn=False")
    return None


def explain_keras_layer(path: str, layer: KerasRecurrent, backend: str, *, masked: bool, mask: list[Reason],
                        machine: list[Reason], torch_rules: Callable[[], list[Reason]]) -> Explanation:
    """Keras's decision for one recurrent layer on `backend` ('tensorflow', 'torch' or 'jax').

    `masked` says whether the layer receives a mask, `mask` the reasons that mask blocks cuDNN, `machine` those of
    the machine (Keras's device check); `torch_rules()` PyTorch's own cuDNN rules, which decide on the torch backend
    once Keras hands the layer to `torch._VF.lstm` (asked only then).
    """
    type_reason = keras_layer_type_reason(layer.layer_type, layer.cell)
    blocked = [type_reason] if type_reason else keras_config_reasons(layer, backend) + mask
    version = installed_keras() if backend == "jax" else None
    scan = not type_reason and runs_own_scan(backend, layer.layer_type, version)
    if backend == "jax" and not type_reason:
        blocked = keras_jax_reasons(layer, version) + blocked
    notes = [note] if (note := keras_dropout_bug_note(layer)) else []
    if scan:  # no setting brings cuDNN: the reasons are what sends the GRU from jax's scan to Keras's loop
        kept = [r for r in blocked if r.code == "jax_gru" or r.code in JAX_GRU_SCAN_DECLINES]
        if others := [r.message for r in blocked if r not in kept]:  # what the fix, another backend, still meets
            notes.append(Reason("jax_gru_elsewhere", f"on Keras's tensorflow or torch backend this GRU would still "
                                                     f"miss cuDNN: {'; '.join(others)}"))
        blocked = kept
    if backend in ("tensorflow", "jax"):
        reasons = blocked + machine
        kernel = "cudnn" if not reasons else keras_loop(backend, layer.unroll)
        raises = bool(reasons)  # the backend's NotImplementedError becomes a ValueError under use_cudnn=True
        if scan:  # jax's own GRU scan returns whatever the activations and bias: only these make it decline
            raises = any(r.code in JAX_GRU_SCAN_DECLINES for r in reasons)
    else:
        reasons = blocked + machine + ([] if blocked or machine else torch_rules())
        kernel = "cudnn" if not reasons else ("aten-loop" if not blocked and not machine
                                              else keras_loop(backend, layer.unroll))
        if kernel == "python-op-loop":
            notes.append(Reason("torch_backend_loop", "Keras's torch backend runs a Python loop over timesteps "
                                                      "here, never torch's fused CPU kernel (oneDNN)"))
        # only these make the torch backend refuse (NotImplementedError); anything else falls back silently
        raises = any(r.code in ("mask_torch_backend", "recurrent_dropout", "reset_after") for r in reasons)
    if layer.layer_type in FUSED_LAYERS and layer.use_cudnn is True and reasons:
        notes.append(Reason("use_cudnn_true", "use_cudnn=True: Keras raises a ValueError here instead of falling back"
                            if raises else f"use_cudnn=True: the {backend} backend still falls back silently here"))
    return Explanation(layer=path, framework=f"keras/{backend}", kernel=kernel, fused_eligible=kernel == "cudnn",
                       reasons=tuple(reasons), notes=tuple(notes), masked=masked)


def explain_on_gpu(path: str, layer: KerasRecurrent, backend: str, *, masked: bool) -> Explanation:
    """Keras's decision for one layer on `backend`, on a machine with a CUDA GPU and cuDNN, where a mask's values are
    not known: on TensorFlow they would decide, and are taken as right-padded; on torch and jax any mask blocks."""
    mask = [MASK_BLOCKS[backend]] if masked and backend in MASK_BLOCKS else []
    return explain_keras_layer(path, layer, backend, masked=masked, mask=mask, machine=[],
                               torch_rules=lambda: [r] if (r := torch_cudnn_dtype_reason(layer.compute_dtype)) else [])


def other_backend_notes(layer: KerasRecurrent, backend: str, here: Explanation) -> list[Reason]:
    """What each of Keras's other backends would run for the same layer on a GPU, where it differs from `here` (the
    layer on `backend`, on a GPU): the one home of this note, for a layer read from a config or loaded through Keras
    (whose activations were judged as `backend` judges them)."""
    notes = []
    for other in (b for b in KERAS_BACKENDS if b != backend):
        there = explain_on_gpu(here.layer, layer, other, masked=here.masked)
        if there.fused_eligible != here.fused_eligible:
            why = f": {'; '.join(r.message for r in there.reasons)}" if there.reasons else ""
            notes.append(Reason("other_backend",
                                f"on Keras's {other} backend it would run {MEANING[there.kernel]}{why}"))
    return notes
