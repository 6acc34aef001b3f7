"""Bring back the warning: say at run time which recurrent layer missed the fused cuDNN kernel, why, and what
that costs.

TensorFlow 2's Keras logged "Layer lstm will not use cuDNN kernels since it doesn't meet the criteria";
Keras 3 logs nothing on any backend, and PyTorch is as quiet when a dtype or `cudnn.enabled=False` keeps
`nn.LSTM` off cuDNN. `watching` and `WatchCallback` watch the first forward of every recurrent layer and
emit one `FallbackWarning` per layer that does not get the fused kernel:

    >>> from lstmstudy.watch import watching, WatchCallback     # doctest: +SKIP
    >>> with watching(model):                                   # a Keras model or a torch module
    ...     model.fit(x, y)
    >>> model.fit(x, y, callbacks=[WatchCallback()])            # the same, as a Keras callback

What ran is observed, not guessed: for Keras, whether the layer's cuDNN path returned or Keras fell back to
its own loop (the fallback runs the layer's cell, the cuDNN path never does); for torch, the profiler's op
names through `lstmstudy.observe`, the study's one observer. Why is `explain_cudnn`'s answer, which agrees
with Keras's and PyTorch's own decisions. On a machine without a GPU the warning says what would happen on
one, and a layer that only lacks a GPU is left alone unless `report_missing_gpu=True`.

Each warning quotes the slowdown claim 1 measured for the closest stored configuration of the same trigger
on a GPU (`measured_cost`), or says that none is stored: it never makes a figure up. After its first forward
a layer is unwatched, so the steps that follow run exactly as without the watch (benchmarks/watch_overhead.py).
The book's page "Check your model" shows it on the blog post's model; `lstmstudy explain PATH` does the same
for a saved `.keras` model (`explain_saved_model`).
"""

from __future__ import annotations

import math
import re
import sys
import warnings
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

from lstmstudy import observe
from lstmstudy.errors import NoRecurrentLayers, StudyError
from lstmstudy.kernels.criteria import Explanation, Reason, explain_cudnn, recurrent_layers

#: the reasons that only say the layer is not on a GPU: on a machine without one, the warning is about a GPU
LACKS_GPU = {"no_gpu", "not_on_gpu"}
#: what to change, by `Reason.code`
FIXES = {
    "use_cudnn": "use use_cudnn='auto' (the default)",
    "recurrent_dropout": "set recurrent_dropout=0 and move the dropout to a Dropout layer between recurrent layers "
                         "(or use dropout=, which cuDNN supports)",
    "activation": "use activation='tanh' (the default)",
    "recurrent_activation": "use recurrent_activation='sigmoid' (the default)",
    "unroll": "use unroll=False (the default)",
    "use_bias": "use use_bias=True (the default)",
    "reset_after": "use reset_after=True (the default)",
    "mask_not_right_padded": "pad sequences at the end (padding='post'), not at the start",
    "mask_fully_masked": "leave empty sequences out of the batch",
    "mask_torch_backend": "on Keras's torch backend, drop the mask (bucket sequences by length instead) or use "
                          "the tensorflow backend",
    "layer_type": "use keras.layers.LSTM or keras.layers.GRU",
    "cudnn_disabled": "set torch.backends.cudnn.enabled = True",
    "dtype": "cast the module and its input to float32 (or float16)",
    "empty_input": "skip empty batches",
    "no_gpu": "run on a machine with a CUDA GPU",
    "not_on_gpu": "move the module and its input to the GPU (.to('cuda'))",
    "cudnn_unavailable": "install a PyTorch build with cuDNN",
}
#: `Reason.code` -> the kernel of claim 1 that measured the same trigger (`cudnn_fallback.TRIGGERS`)
TRIGGERS = {
    "use_cudnn": "keras.generic",
    "recurrent_dropout": "keras.recurrent_dropout",
    "activation": "keras.relu",
    "unroll": "keras.unroll",
    "use_bias": "keras.no_bias",
    "cudnn_disabled": "torch.native",
}


class FallbackWarning(UserWarning):
    """A recurrent layer did not get (or on a GPU would not get) the fused cuDNN kernel; `finding` says why.

    A `UserWarning`, so the `warnings` filters apply: `warnings.simplefilter("error", FallbackWarning)` makes
    it an exception, `warnings.simplefilter("ignore", FallbackWarning)` silences it. Keras re-raises an
    exception from inside a layer call as a new one of the same class with a longer message, so a caught
    `FallbackWarning` may hold only that text (`finding` None); the `Watch`'s `findings` always keep it.
    """

    def __init__(self, finding: Finding | str) -> None:
        super().__init__(str(finding))
        self.finding = finding if isinstance(finding, Finding) else None


# --- the cost, from claim 1's measurements ------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    """The slowdown claim 1 measured on a GPU for the closest stored configuration of one trigger.

    `ratio` is None when no such measurement is stored; `missing` then says what is missing.
    """

    trigger: str | None
    setting: str = ""
    hardware_id: str = ""
    batch: int | None = None
    hidden: int | None = None
    phase: str = ""
    ratio: float | None = None
    ratio_lo: float | None = None
    ratio_hi: float | None = None
    missing: str = ""
    framework: str = ""  # what the measured rows ran on: "keras/tensorflow", "keras/torch", "torch"

    def __str__(self) -> str:
        if self.ratio is None:
            return self.missing
        return (f"{self.ratio:.2f}x slower than cuDNN (95% CI {self.ratio_lo:.2f}-{self.ratio_hi:.2f}), measured by "
                f"claim 1 for {self.setting} on {self.hardware_id} ({self.framework}, fp32, batch {self.batch}, "
                f"hidden {self.hidden}, {self.phase})")


def measured_cost(codes: Iterable[str], *, layer_type: str = "LSTM", batch: int | None = None,
                  hidden: int | None = None, phase: str | None = None, framework: str | None = None,
                  root: Path | None = None) -> Cost:
    """The slowdown stored for the closest GPU configuration of the first of `codes` that claim 1 measured.

    Only fp32 rows are quoted (a precision is a different kernel). Closest: the same framework and backend
    as the layer (`framework`, as `explain_cudnn` names it: "keras/torch", "torch"; None compares none)
    first, then the same phase ('train' or 'inference'; None prefers 'train'), then the nearest batch and
    hidden size on a log scale (a size not known is not compared). The cost names what it was measured on.
    Claim 1 measures LSTMs only, on every hardware set under `root` (default: the study's `results/`);
    GPU sets are those named `cuda-*`.
    """
    from lstmstudy.claims import cudnn_fallback

    ordered = sorted(codes, key=lambda code: code != "unroll")  # an unrolled layer runs the unrolled loop
    trigger = next((TRIGGERS[code] for code in ordered if code in TRIGGERS), None)
    if layer_type != "LSTM":
        return Cost(None, missing=f"no measured cost: claim 1 measures LSTM layers only, not {layer_type}")
    if trigger is None:
        measured = ", ".join(cudnn_fallback.TRIGGERS[k][1] for k in TRIGGERS.values())
        return Cost(None, missing=f"no measured cost: claim 1 has not measured this trigger (it measures {measured})")
    setting = cudnn_fallback.TRIGGERS[trigger][1]
    table = _gpu_slowdowns(root)
    rows = table[(table.kernel == trigger) & (table.precision == "fp32")] if not table.empty else table
    if rows.empty:
        where = "claim 1 has no cuda-* result set" if table.empty else "none of claim 1's cuda-* result sets has it"
        return Cost(trigger, setting, missing=f"no GPU measurement is stored yet for {setting} ({where}); "
                                              f"`lstmstudy measure --claims 01 --device cuda` on a GPU adds one")

    def distance(row) -> tuple:
        sizes = sum(abs(math.log2(mine / int(theirs))) for mine, theirs in ((batch, row.batch), (hidden, row.hidden))
                    if mine)
        other_framework = framework is not None and row.framework != framework
        return other_framework, row.phase != (phase or "train"), sizes, row.hardware_id, int(row.batch), int(row.hidden)

    best = min(rows.itertuples(), key=distance)
    return Cost(trigger, setting, best.hardware_id, int(best.batch), int(best.hidden), best.phase,
                float(best.ratio), float(best.ratio_lo), float(best.ratio_hi), framework=best.framework)


_SLOWDOWNS: dict[tuple, pd.DataFrame] = {}


def _gpu_slowdowns(root: Path | None) -> pd.DataFrame:
    """Claim 1's slowdowns on the GPU sets under `root`, computed once per state of its files (a bootstrap)."""
    from lstmstudy import results
    from lstmstudy.claims import cudnn_fallback

    folder = Path(root or results.default_root()) / cudnn_fallback.NAME
    state = tuple((path.name, path.stat().st_mtime_ns) for path in sorted(folder.glob("cuda-*.csv")))
    if not state:
        return pd.DataFrame()
    if (folder, state) not in _SLOWDOWNS:
        stored = results.load(cudnn_fallback.NAME, root)
        gpu = stored[stored.hardware_id.str.startswith("cuda-")] if not stored.empty else stored
        table = cudnn_fallback.slowdowns(gpu) if not gpu.empty else gpu
        if not table.empty:  # what each slowdown's rows ran on, named as explain_cudnn names a layer's framework
            ran_on = {(row.hardware_id, row.kernel): (f"keras/{row.backend}" if row.framework == "keras"
                                                      else row.framework) for row in gpu.itertuples()}
            table = table.assign(framework=[ran_on.get(key, "") for key in zip(table.hardware_id, table.kernel)])
        _SLOWDOWNS[(folder, state)] = table
    return _SLOWDOWNS[(folder, state)]


# --- one layer's finding ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One recurrent layer: the kernel it runs, every reason it is not cuDNN, what to change, and the cost.

    `on_gpu` is True when the reasons are what a GPU would meet, explained on a machine without one
    (`ran_here` then names what ran here, where it was observed). `cost` is None for a layer that gets cuDNN.
    """

    layer: str
    layer_type: str
    framework: str
    kernel: str
    reasons: tuple[Reason, ...] = ()
    notes: tuple[Reason, ...] = ()
    on_gpu: bool = False
    ran_here: str = ""
    cost: Cost | None = None
    fixes: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        fixes = dict.fromkeys(FIXES[r.code] for r in self.reasons if r.code in FIXES)  # in order, once each
        object.__setattr__(self, "fixes", tuple(fixes))

    @property
    def fused(self) -> bool:
        return self.kernel in observe.GPU_FUSED and not self.reasons

    def __str__(self) -> str:
        name = f"{self.layer_type} layer {self.layer!r} [{self.framework}]"
        what = observe.MEANING.get(self.kernel, self.kernel)
        if self.fused:  # a note still matters: a mask that cuDNN takes only right-padded
            return "\n".join([f"{name}: {what}" + (" on a GPU" if self.on_gpu else ""),
                              *(f"  note: {n.message}" for n in self.notes)])
        if self.on_gpu:
            head = f"{name}: on a GPU this layer would not use cuDNN but {what}, because:"
        else:
            head = f"{name} ran {what}, not cuDNN, because:"
        lines = [head, *(f"  - {r.message}" for r in self.reasons)]
        if self.ran_here:
            lines.append(f"  here (no GPU) it ran {observe.MEANING.get(self.ran_here, self.ran_here)}")
        lines += [f"  note: {n.message}" for n in self.notes]
        lines += [f"  fix: {fix}" for fix in self.fixes]
        if self.cost is not None:
            lines.append(f"  cost: {self.cost}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        """For `lstmstudy explain --json`: plain types only."""
        out = asdict(self)
        out["fused"] = self.fused
        return out


def finding(explanation: Explanation, layer_type: str, *, ran: str | None = None, on_gpu: Explanation | None = None,
            report_missing_gpu: bool = False, batch: int | None = None,
            hidden: int | None = None, phase: str | None = None, root: Path | None = None) -> Finding | None:
    """What to say about one layer, or None when there is nothing to say.

    `explanation` is `explain_cudnn`'s answer for this machine and `ran` the kernel observed (None when not
    observed). On a machine without a GPU, `on_gpu` (the answer for a machine with one) decides: its reasons
    are reported as what a GPU would meet, since that is what the user can act on, and a layer that would get
    cuDNN there is reported only with `report_missing_gpu`.
    """
    kernel = ran or explanation.kernel
    reasons = explanation.reasons
    if kernel in observe.GPU_FUSED and not reasons:
        return None
    if not reasons:  # a fallback was observed that the explainer does not predict
        reasons = (Reason("unexplained", "the framework fell back for a reason explain_cudnn does not model"),)
    ran_here = ""
    if on_gpu is not None and on_gpu.reasons and {r.code for r in reasons} & LACKS_GPU:
        explanation, ran_here, kernel, reasons = on_gpu, kernel, on_gpu.kernel, on_gpu.reasons
    if {r.code for r in reasons} <= LACKS_GPU:
        if not report_missing_gpu:
            return None
        cost = Cost(None, missing="no measured cost: only the GPU is missing; on one this layer would get cuDNN")
    else:
        cost = measured_cost([r.code for r in reasons], layer_type=layer_type, batch=batch, hidden=hidden,
                             phase=phase, framework=explanation.framework, root=root)
    return Finding(explanation.layer, layer_type, explanation.framework, kernel, tuple(reasons), explanation.notes,
                   bool(ran_here), ran_here, cost)


# --- watching layers at run time ----------------------------------------------------------------------


class Watch:
    """Watches the first forward of every recurrent layer of `models` between `start()` and `stop()`.

    Each layer that does not get the fused kernel gets one `FallbackWarning` per `Watch`, and its `Finding`
    is kept in `findings`. A layer is unwatched after its first forward, so later steps cost nothing extra.
    Keras traces a `fit`'s step once per model: a model already trained in this process is not traced
    again, and its layers are then not seen. A layer whose forward never reaches its own loop is not
    reported either: a `Bidirectional` LSTM that Keras's torch or jax backend runs as one fused cuDNN call.
    A torch layer's first forward runs under the PyTorch profiler, so it cannot be watched inside a
    profiler session of your own.
    """

    def __init__(self, models: Iterable, *, report_missing_gpu: bool = False, results_root: Path | None = None):
        self.models = list(models)
        self.report_missing_gpu = report_missing_gpu
        self.results_root = results_root
        self.findings: list[Finding] = []
        self._seen: set[int] = set()
        self._undo: dict[int, Callable[[], None]] = {}

    def start(self) -> None:
        keras = sys.modules.get("keras")
        for model in self.models:
            for path, layer in recurrent_layers(model):
                if id(layer) in self._seen or id(layer) in self._undo:
                    continue
                if keras is not None and isinstance(layer, keras.layers.Layer):
                    self._undo[id(layer)] = self._watch_keras(keras, path, layer)
                else:
                    self._undo[id(layer)] = self._watch_torch(path, layer)

    def stop(self) -> None:
        for undo in list(self._undo.values()):
            undo()
        self._undo.clear()

    def __enter__(self) -> Watch:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _report(self, layer, found: Finding | None) -> None:
        self._seen.add(id(layer))
        self._undo.pop(id(layer), lambda: None)()
        if found is not None:
            self.findings.append(found)
            warnings.warn(FallbackWarning(found), stacklevel=_first_caller_outside_libraries())

    def _watch_keras(self, keras, path: str, layer) -> Callable[[], None]:
        """Wrap the layer's `inner_loop` (in its instance dict, as `explain_cudnn` does) for its first real call.

        LSTM and GRU try the backend's cuDNN function first and fall back to `RNN.inner_loop`, which runs
        the cell step by step; the cuDNN path never calls the cell. So a call of the cell is the fallback, the
        layer's own loop, which `observe.keras_loop` names.
        """
        from keras.src.backend import in_symbolic_scope

        inner_loop = layer.inner_loop

        def watched_inner_loop(sequences, initial_state, mask, training=False):
            if in_symbolic_scope():  # a model being built on placeholders: not a real forward yet
                return inner_loop(sequences, initial_state, mask, training=training)
            cell_calls = []
            cell_call = layer.cell.call

            def counted(*args, **kwargs):
                cell_calls.append(1)
                return cell_call(*args, **kwargs)

            vars(layer.cell)["call"] = counted
            try:
                outputs = inner_loop(sequences, initial_state, mask, training=training)
            finally:
                vars(layer.cell).pop("call", None)
            ran = observe.keras_loop(keras.backend.backend(), layer.unroll) if cell_calls else None
            self._report(layer, self._keras_finding(keras, path, layer, ran, _concrete(keras, mask),
                                                    sequences.shape[0], training))
            return outputs

        vars(layer)["inner_loop"] = watched_inner_loop  # around both Keras's and torch's attribute tracking
        return lambda: vars(layer).pop("inner_loop", None)

    def _keras_finding(self, keras, path: str, layer, ran: str | None, mask, batch, training) -> Finding | None:
        backend = keras.backend.backend()
        if ran is None and backend != "torch":
            return None  # Keras's own cuDNN path returned: cuDNN ran (on torch, PyTorch's rules decide next)
        if backend in ("tensorflow", "torch"):
            here, gpu = explain_cudnn(layer, mask=mask), explain_cudnn(layer, mask=mask, device="cuda")
            here, gpu = replace(here[0], layer=path), replace(gpu[0], layer=path)
        else:  # jax: observed, but explain_cudnn cannot say why
            here, gpu = _unexplained(backend, path, ran), None
        return finding(here, type(layer).__name__, ran=ran, on_gpu=gpu, report_missing_gpu=self.report_missing_gpu,
                       batch=batch if isinstance(batch, int) else None, hidden=getattr(layer.cell, "units", None),
                       phase="train" if training else "inference", root=self.results_root)

    def _watch_torch(self, path: str, rnn: nn.RNNBase) -> Callable[[], None]:
        """Run the module's first forward under the profiler (`observe.observe`) and name what it ran.

        `observe` and `explain_cudnn` speak one vocabulary, so the observed label is the finding's kernel.
        """
        forward = rnn.forward

        def watched_forward(*args, **kwargs):
            x = args[0] if args else kwargs["input"]
            packed = isinstance(x, nn.utils.rnn.PackedSequence)
            data = x.data if packed else x
            outputs = []
            seen = observe.observe([lambda: outputs.append(forward(*args, **kwargs))], data.device)
            if packed:
                batch = int(x.batch_sizes[0])
            else:
                batch = int(data.shape[0 if rnn.batch_first else 1]) if data.dim() == 3 else 1
            here = replace(explain_cudnn(rnn)[0], layer=path)
            gpu = replace(explain_cudnn(rnn, device="cuda")[0], layer=path)
            phase = "train" if rnn.training and torch.is_grad_enabled() else "inference"
            self._report(rnn, finding(here, rnn.mode if rnn.mode in ("LSTM", "GRU") else "RNN", ran=seen.kernel,
                                      on_gpu=gpu, report_missing_gpu=self.report_missing_gpu, batch=batch,
                                      hidden=rnn.hidden_size, phase=phase, root=self.results_root))
            return outputs[0]

        vars(rnn)["forward"] = watched_forward
        return lambda: vars(rnn).pop("forward", None)


def _unexplained(backend: str, path: str, ran: str) -> Explanation:
    """A fallback on a backend `explain_cudnn` does not cover (jax): only whether a GPU was there is known."""
    if backend == "jax" and sys.modules["jax"].default_backend() != "gpu":
        reason = Reason("no_gpu", "no GPU: jax.default_backend() is not 'gpu'", device=True)
    else:
        reason = Reason("unexplained", f"explain_cudnn does not cover Keras's {backend} backend, so the reasons "
                                       "are not listed")
    return Explanation(path, f"keras/{backend}", ran, False, (reason,))


def _first_caller_outside_libraries() -> int:
    """The `stacklevel` of the first frame outside Keras, TensorFlow, torch, jax and this package, so that the
    warning points at the user's `fit` or forward call (Python 3.12's `skip_file_prefixes`, by hand)."""
    libraries = tuple(str(Path(sys.modules[name].__file__).parent) for name in ("keras", "tensorflow", "torch", "jax",
                                                                                 "lstmstudy")
                      if getattr(sys.modules.get(name), "__file__", None))
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and (frame.f_code.co_filename.startswith(libraries)
                                         or "__autograph_generated" in frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def _concrete(keras, mask) -> np.ndarray | None:
    """The mask as a boolean array, or None when there is none or it is symbolic (traced inside a compiled
    step such as `fit`'s, where its values are not known yet and the explanation leaves the mask out)."""
    first = mask[0] if keras.tree.is_nested(mask) else mask  # as inner_loop itself unpacks it
    if first is None:
        return None
    try:
        return np.asarray(keras.ops.convert_to_numpy(first)).astype(bool)
    except (NotImplementedError, TypeError):  # a graph tensor (TensorFlow) or a tracer (jax)
        return None


def watching(*models, report_missing_gpu: bool = False, results_root: Path | None = None) -> Watch:
    """A context manager that warns, once per layer, about each recurrent layer of `models` that does not get
    the fused cuDNN kernel in its first forward inside the block. `models` are Keras layers or models or torch
    modules; `report_missing_gpu` also reports layers whose only problem is that this machine has no GPU."""
    if not models:
        raise TypeError("watching needs the models (Keras or torch) whose recurrent layers it should watch")
    return Watch(models, report_missing_gpu=report_missing_gpu, results_root=results_root)


def _callback_class():
    import keras

    class WatchCallback(keras.callbacks.Callback):
        """`model.fit(..., callbacks=[WatchCallback()])`: `watching` the model for the first step of fit,
        evaluate and predict; one `FallbackWarning` per layer for the callback's lifetime."""

        def __init__(self, *, report_missing_gpu: bool = False, results_root: Path | None = None):
            super().__init__()
            self.report_missing_gpu = report_missing_gpu
            self.results_root = results_root
            self.watch: Watch | None = None
            self._depth = 0  # fit's validation runs evaluate inside it

        def _begin(self, logs=None) -> None:
            if self.watch is None:
                self.watch = Watch([self.model], report_missing_gpu=self.report_missing_gpu,
                                   results_root=self.results_root)
            self._depth += 1
            if self._depth == 1:
                self.watch.start()

        def _end(self, logs=None) -> None:
            self._depth -= 1
            if self._depth == 0:
                self.watch.stop()

        @property
        def findings(self) -> list[Finding]:
            return self.watch.findings if self.watch else []

        on_train_begin = on_test_begin = on_predict_begin = _begin
        on_train_end = on_test_end = on_predict_end = _end

    return WatchCallback


def __getattr__(name: str):
    """`WatchCallback` subclasses `keras.callbacks.Callback`; it is made on first use, so that watching torch
    modules never imports Keras (and TensorFlow)."""
    if name == "WatchCallback":
        globals()[name] = _callback_class()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- a saved model --------------------------------------------------------------------------------------


def explain_saved_model(path: Path, *, results_root: Path | None = None) -> list[Finding]:
    """Every recurrent layer of a saved Keras model as it would run on a GPU with cuDNN, with the cost.

    The model is loaded without compiling, and each layer explained with `explain_cudnn` (device 'cuda'). Where a
    layer makes a mask (Embedding(mask_zero=True), Masking), the model is called once on a batch of ones, so
    Keras's own propagation shows which recurrent layers the mask reaches; nothing else is run. `StudyError`
    names a missing file or a file Keras cannot load; `NoRecurrentLayers` a model without recurrent layers.
    """
    path = Path(path)
    if not path.exists():
        raise StudyError(f"no such file: {path}")
    if not path.is_file():
        raise StudyError(f"{path} is not a file; give the path of a model saved with model.save('....keras')")
    if path.suffix == ".keras" and not zipfile.is_zipfile(path):
        raise StudyError(f"{path} is not a Keras model: a .keras file is a zip archive, and this one is not")
    from lstmstudy.terminal import quiet_native_stderr

    with quiet_native_stderr():  # TensorFlow's C++ start-up and CUDA-probe lines
        import keras

        try:
            model = keras.saving.load_model(path, compile=False)
        except Exception as exc:  # Keras raises ValueError, OSError, KeyError, ... for what it cannot read
            if custom := re.search(r"Could not locate (?:class|function) '([^']+)'", str(exc)):
                raise StudyError(
                    f"{path} uses a custom class, {custom[1]}, that Keras cannot find: import the module that "
                    f"defines it (decorated with keras.saving.register_keras_serializable) before loading") from None
            first = str(exc).strip().split(". ")[0] or type(exc).__name__
            raise StudyError(f"{path} is not a Keras model Keras can load ({first})") from None
        layers = recurrent_layers(model)
        if not layers:
            raise NoRecurrentLayers(f"{path} has no recurrent layers (LSTM, GRU, SimpleRNN or RNN) to explain")
        masked = _masks_made(keras, model)
        inputs = _unpadded_batch(model) if masked else None
        try:
            explanations = explain_cudnn(model, inputs=inputs, device="cuda")
        except ValueError as exc:  # a backend the explainer does not model (jax)
            raise StudyError(f"{path}: {exc}") from None
        backend = keras.backend.backend()
    batch = model.inputs[0].shape[0] if getattr(model, "inputs", None) else None
    findings = []
    for (name, layer), explanation in zip(layers, explanations):
        layer_type = type(layer).__name__
        cost = None if explanation.fused_eligible else measured_cost(
            explanation.codes, layer_type=layer_type, batch=batch, hidden=getattr(layer.cell, "units", None),
            framework=explanation.framework, root=results_root)
        notes = explanation.notes
        if masked and inputs is None:
            notes += (Reason("mask_unknown", f"{masked} makes a mask, but this model has no symbolic inputs to call "
                                             f"it with: whether the mask reaches this layer is not checked"),)
        elif explanation.masked and backend == "tensorflow" and explanation.fused_eligible:
            notes += (Reason("mask_right_padded_only", f"{masked} makes a mask that reaches this layer: cuDNN runs "
                             f"it only while every sequence is right-padded, and keras.utils.pad_sequences pads on "
                             f"the left unless padding='post'; on the torch backend any mask means the generic "
                             f"loop"),)
        findings.append(Finding(name, layer_type, explanation.framework, explanation.kernel, explanation.reasons,
                                notes, on_gpu=True, cost=cost))
    return findings


def _masks_made(keras, model) -> str:
    """The layers of a loaded model that make a mask (`Embedding(mask_zero=True)`, `Masking`), named; '' if none."""
    found = [layer for layer in model._flatten_layers(include_self=False)
             if isinstance(layer, keras.layers.Masking)
             or (isinstance(layer, keras.layers.Embedding) and getattr(layer, "mask_zero", False))]
    return ", ".join(f"{type(layer).__name__} {layer.name!r}" for layer in found)


def _unpadded_batch(model) -> object | None:
    """One batch of ones for a saved model's inputs (no step padded, no value masked), so that Keras's own mask
    propagation shows which recurrent layers a mask reaches (a dimension left open is 1 for the batch, 4 for the
    rest); None for a model without symbolic inputs (a subclassed one)."""
    inputs = getattr(model, "inputs", None)
    if not inputs:
        return None
    batch = []
    for spec in inputs:
        shape = [1 if i == 0 and d is None else (4 if d is None else d) for i, d in enumerate(spec.shape)]
        batch.append(np.ones(shape, dtype=str(spec.dtype)))
    return batch[0] if len(batch) == 1 else batch
