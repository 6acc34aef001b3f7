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
for a saved model from its config (`lstmstudy.saved_config`), and loads it here (`explain_saved_model`) only where
the config cannot tell.
"""

from __future__ import annotations

import inspect
import re
import sys
import warnings
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lstmstudy import observe
from lstmstudy.backends import keras_private, user_backend
from lstmstudy.cudnn_rules import Reason, installed_keras, other_backend_notes, right_padded_only_note, runs_own_scan
from lstmstudy.errors import NoRecurrentLayers, StudyError
from lstmstudy.findings import Finding, finding, measured_cost
from lstmstudy.kernels.criteria import explain_cudnn, keras_settings, recurrent_layers

if TYPE_CHECKING:  # torch is imported where a torch module is watched: Keras on TensorFlow or jax runs without it
    from torch import nn


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


# --- watching layers at run time ----------------------------------------------------------------------


class Watch:
    """Watches the first forward of every recurrent layer of `models` between `start()` and `stop()`.

    Each layer that does not get the fused kernel gets one `FallbackWarning` per `Watch`, and its `Finding`
    is kept in `findings`. A layer is unwatched after its first forward, so later steps cost nothing extra.
    Keras traces a `fit`'s step once per model: a model already trained in this process is not traced
    again, and its layers are then not seen. On TensorFlow, a model that makes a mask is first called eagerly on
    the first batch of its `fit`, `evaluate` or `predict`, so that the mask's values are seen
    (`_watch_traced_calls`); `WatchCallback`, which gets no data, sees them only where the step runs eagerly.
    A layer whose forward never reaches its own loop is not reported either: a `Bidirectional` LSTM that
    Keras's torch or jax backend runs as one fused cuDNN call.
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
            if (keras is not None and isinstance(model, keras.Model) and keras.backend.backend() == "tensorflow"
                    and _masks_made(keras, model) and id(model) not in self._undo):
                self._undo[id(model)] = self._watch_traced_calls(keras, model)

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
        in_symbolic_scope = keras_private("keras.src.backend", "in_symbolic_scope")
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

    def _watch_traced_calls(self, keras, model) -> Callable[[], None]:
        """Run the first batch of `fit`, `evaluate` and `predict` eagerly once, before Keras traces the step.

        On TensorFlow these trace the model into a tf.function, where a mask's values are symbolic: a layer that a
        left-padded mask keeps off cuDNN would be explained without its mask. So while a layer of a model that makes
        a mask is still watched, the model is first called eagerly on the batch the step takes first (inference,
        once), where the watched layers see the mask's values, report and are unwatched: the step Keras then traces
        and caches runs as without the watch. Left alone: a model with a stateful layer (the call would advance its
        state), `run_eagerly` (the layers see the values anyway) and data that cannot be read without using it up
        (a generator).
        """
        methods = {name: getattr(model, name) for name in ("fit", "evaluate", "predict")}

        def watched(name: str):
            method = methods[name]
            signature = inspect.signature(method)

            def call(*args, **kwargs):
                pending = [layer for _, layer in recurrent_layers(model) if id(layer) in self._undo]
                if pending and not model.run_eagerly and not any(getattr(layer, "stateful", False)
                                                                   for layer in pending):
                    given = signature.bind_partial(*args, **kwargs).arguments
                    batch = _first_batch(keras, given.get("x"), given.get("batch_size"))
                    if batch is not None:
                        model(batch, training=False)
                return method(*args, **kwargs)

            return call

        def undo() -> None:
            for name in methods:
                vars(model).pop(name, None)

        for name in methods:
            vars(model)[name] = watched(name)  # in the instance dict, around Keras's attribute tracking
        return undo

    def _keras_finding(self, keras, path: str, layer, ran: str | None, mask, batch, training) -> Finding | None:
        backend = keras.backend.backend()
        if ran is None and runs_own_scan(backend, keras_settings(keras, backend, layer).layer_type, installed_keras()):
            ran = observe.keras_loop(backend, layer.unroll)  # the backend's own loop returned, not cuDNN
        if ran is None and backend != "torch":
            return None  # Keras's own cuDNN path returned: cuDNN ran (on torch, PyTorch's rules decide next)
        here, gpu = explain_cudnn(layer, mask=mask), explain_cudnn(layer, mask=mask, device="cuda")
        here, gpu = replace(here[0], layer=path), replace(gpu[0], layer=path)
        return finding(here, type(layer).__name__, ran=ran, on_gpu=gpu, report_missing_gpu=self.report_missing_gpu,
                       batch=batch if isinstance(batch, int) else None, hidden=getattr(layer.cell, "units", None),
                       phase="train" if training else "inference", root=self.results_root)

    def _watch_torch(self, path: str, rnn: nn.RNNBase) -> Callable[[], None]:
        """Run the module's first forward under the profiler (`observe.observe`) and name what it ran.

        `observe` and `explain_cudnn` speak one vocabulary, so the observed label is the finding's kernel.
        """
        import torch
        from torch import nn

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


def _first_batch(keras, x, batch_size: int | None):
    """The inputs of the first batch `fit`, `evaluate` or `predict` takes from `x`: arrays (nested or not), a
    tf.data.Dataset or a PyDataset; None for data that cannot be read without using it up (a generator)."""
    if x is None or inspect.isgenerator(x):
        return None
    if isinstance(x, keras.utils.PyDataset):
        return keras.utils.unpack_x_y_sample_weight(x[0])[0]
    tf = sys.modules["tensorflow"]
    if isinstance(x, tf.data.Dataset):
        return keras.utils.unpack_x_y_sample_weight(next(iter(x)))[0]
    try:
        return keras.tree.map_structure(lambda array: array[:batch_size or 32], x)
    except TypeError:  # something else that only Keras's own adapters read
        return None


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
        try:
            import keras
        except ImportError as exc:  # Keras, or the library of the backend the user's setup names, is not here
            chosen = user_backend()
            raise StudyError(f"loading {path} through Keras needs Keras on its {chosen.name} backend "
                             f"({chosen.chosen_by}), and {exc.name or exc} cannot be imported here: install it, or "
                             f"set KERAS_BACKEND to a backend that is installed") from None
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
        explanations = explain_cudnn(model, inputs=inputs, device="cuda")
        backend = keras.backend.backend()
    batch = model.inputs[0].shape[0] if getattr(model, "inputs", None) else None
    findings = []
    for (name, layer), explanation in zip(layers, explanations):
        layer_type = type(layer).__name__
        cost = None if explanation.fused_eligible else measured_cost(
            explanation.codes, layer_type=layer_type, batch=batch, hidden=getattr(layer.cell, "units", None),
            framework=explanation.framework, root=results_root)
        # the other backends judged from this layer as `backend` reads it: an activation accepted here only as this
        # backend's own function (tf.sigmoid) is taken as accepted there too, so such a note may be missing
        notes = explanation.notes + tuple(other_backend_notes(keras_settings(keras, backend, layer), backend,
                                                              explanation))
        if masked and inputs is None:
            notes += (Reason("mask_unknown", f"{masked} makes a mask, but this model has no symbolic inputs to call "
                                             f"it with: whether the mask reaches this layer is not checked"),)
        elif explanation.masked and backend == "tensorflow" and explanation.fused_eligible:
            notes += (right_padded_only_note(masked),)
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
