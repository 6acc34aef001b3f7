"""Explain a saved Keras model from its config alone: no TensorFlow, Keras or torch imported, a fraction of a second.

A `.keras` file is a zip whose `config.json` holds every argument cuDNN's criteria read; an `.h5` file holds the
same in its `model_config` attribute. `explain_config` walks that graph (Sequential and functional models, nested
models, `Bidirectional` and `TimeDistributed`), finds every recurrent layer (LSTM, GRU, SimpleRNN, ConvLSTM, RNN
around any cell) and whether a mask reaches it, and asks `cudnn_rules` what Keras decides on a GPU, as
`kernels.criteria` does for a live layer.

Masks: a functional model records the mask each layer was called with (Keras 3 writes the mask that its own
propagation gave a layer into the layer's call arguments, `inbound_nodes`), so a recorded mask is Keras's own
answer. A Sequential model records none, and neither does a nested model's inside: there the mask is carried
from the layers that make one (`Embedding(mask_zero=True)`, `Masking`) through the layers Keras passes it on
through (`MASK_PASSERS`, checked against Keras in the tests). Where the config cannot tell (a custom class, a
`Lambda` with a mask function) the answer says so: `ConfigAnswer.undecided` says what loading the model through
Keras would settle, and `unknown` names the custom classes.
"""

from __future__ import annotations

import json
import os
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lstmstudy.backends import KERAS_ALL_BACKENDS, KERAS_BACKENDS, UserBackend, user_backend
from lstmstudy.cudnn_rules import (MASK_BLOCKS, Explanation, KerasRecurrent, Reason, explain_on_gpu,
                                   other_backend_notes, right_padded_only_note)
from lstmstudy.errors import NoRecurrentLayers, StudyError, WeightsOnly
from lstmstudy.findings import Finding, measured_cost

#: Keras's recurrent layers, each with the cell it runs (`KerasRecurrent.cell`); RNN's cell is in its config
RECURRENT = {"LSTM": "LSTMCell", "GRU": "GRUCell", "SimpleRNN": "SimpleRNNCell", "ConvLSTM1D": "ConvLSTMCell",
             "ConvLSTM2D": "ConvLSTMCell", "ConvLSTM3D": "ConvLSTMCell", "RNN": ""}
#: Keras 2's cuDNN-only layers (`keras.layers.CuDNNLSTM`, TensorFlow 1's and 2's `tf.compat.v1.keras.layers`), with
#: the Keras 3 layer a converted model holds instead
KERAS2_CUDNN = {"CuDNNLSTM": "LSTM", "CuDNNGRU": "GRU"}
#: layers that hold other layers in their config, under these keys
WRAPPERS = {"Bidirectional": ("layer", "backward_layer"), "TimeDistributed": ("layer",),
            "SpectralNormalization": ("layer",), "Pipeline": ("layers",)}
MODELS = ("Sequential", "Functional", "Model")
#: built-in layers that run code the config does not describe: a recurrent layer may be inside
OPAQUE = ("TorchModuleWrapper", "JaxLayer", "FlaxLayer", "TFSMLayer")
#: layers that pass the mask they receive on unchanged (`supports_masking` and Keras's default `compute_mask`)
MASK_PASSERS = frozenset(
    "Activation ActivityRegularization AlphaDropout BatchNormalization Dense Dropout ELU GaussianDropout GaussianNoise "
    "GroupNormalization Identity LayerNormalization LeakyReLU MultiHeadAttention Normalization PReLU ReLU Rescaling "
    "Softmax SpatialDropout1D SpatialDropout2D SpatialDropout3D TimeDistributed UnitNormalization".split())
#: layers whose output is masked when any input is (merging layers), or when their first input is (attention)
MASK_MERGERS = frozenset("Add Average Concatenate Maximum Minimum Multiply Subtract".split())
MASK_FROM_FIRST = frozenset("Attention AdditiveAttention".split())
#: Keras 3's layer classes, to tell a custom class in an `.h5` config (which names no module) from a built-in one
KERAS_LAYERS = frozenset(
    "Activation ActivityRegularization AdaptiveAveragePooling1D AdaptiveAveragePooling2D AdaptiveAveragePooling3D "
    "AdaptiveMaxPooling1D AdaptiveMaxPooling2D AdaptiveMaxPooling3D Add AdditiveAttention AlphaDropout Attention "
    "AugMix AutoContrast Average AveragePooling1D AveragePooling2D AveragePooling3D BatchNormalization Bidirectional "
    "CategoryEncoding CenterCrop Concatenate ContrastLimitedAdaptiveHistogramEqualization Conv1D Conv1DTranspose "
    "Conv2D Conv2DTranspose Conv3D Conv3DTranspose ConvLSTM1D ConvLSTM2D ConvLSTM3D Cropping1D Cropping2D Cropping3D "
    "CutMix Dense DepthwiseConv1D DepthwiseConv2D Discretization Dot Dropout ELU EinsumDense Embedding Equalization "
    "Flatten FlaxLayer GRU GRUCell GaussianDropout GaussianNoise GlobalAveragePooling1D GlobalAveragePooling2D "
    "GlobalAveragePooling3D GlobalMaxPooling1D GlobalMaxPooling2D GlobalMaxPooling3D GroupNormalization "
    "GroupedQueryAttention HashedCrossing Hashing Identity InputLayer IntegerLookup JaxLayer LSTM LSTMCell Lambda "
    "Layer LayerNormalization LeakyReLU Masking MaxNumBoundingBoxes MaxPooling1D MaxPooling2D MaxPooling3D Maximum "
    "MelSpectrogram Minimum MixUp MultiHeadAttention Multiply Normalization PReLU Permute Pipeline RMSNormalization "
    "RNN RandAugment RandomBrightness RandomColorDegeneration RandomColorJitter RandomContrast RandomCrop "
    "RandomElasticTransform RandomErasing RandomFlip RandomGaussianBlur RandomGrayscale RandomHue RandomInvert "
    "RandomPerspective RandomPosterization RandomRotation RandomSaturation RandomSharpness RandomShear "
    "RandomTranslation RandomZoom ReLU RepeatVector Rescaling Reshape Resizing ReversibleEmbedding STFTSpectrogram "
    "SeparableConv1D SeparableConv2D SimpleRNN SimpleRNNCell Softmax Solarization SpatialDropout1D SpatialDropout2D "
    "SpatialDropout3D SpectralNormalization StackedRNNCells StringLookup Subtract TFSMLayer TextVectorization "
    "TimeDistributed TorchModuleWrapper UnitNormalization UpSampling1D UpSampling2D UpSampling3D Wrapper ZeroPadding1D "
    "ZeroPadding2D ZeroPadding3D Sequential Functional Model".split())

@dataclass(frozen=True)
class Found:
    """One recurrent layer in a saved config: its path ('bidirectional/forward_lstm'), class, config, and the mask that
    reaches it: who made it, False for none, None where the config cannot tell."""

    path: str
    layer_type: str
    config: dict
    masked: str | bool | None


@dataclass(frozen=True)
class Unknown:
    """A class the config cannot see into (a custom layer or model, a wrapper of foreign code), by path."""

    path: str
    class_name: str
    why: str


@dataclass
class ConfigAnswer:
    """What a saved config tells: the recurrent layers (`found`), the classes it cannot see into (`unknown`), and
    what only loading the model through Keras would settle (`undecided`, in words); `batch` is the model's batch
    size where its input fixes one."""

    found: list[Found] = field(default_factory=list)
    unknown: list[Unknown] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)
    batch: int | None = None


def read_config(path: Path) -> dict:
    """The model config of a `.keras` or `.h5` file; `StudyError` for anything else, in one line."""
    path = Path(path)
    if not path.exists():
        raise StudyError(f"no such file: {path}")
    if not path.is_file():
        raise StudyError(f"{path} is not a file; give the path of a model saved with model.save('....keras')")
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            if "config.json" not in archive.namelist():
                raise StudyError(f"{path} is not a Keras model: the zip archive has no config.json")
            return json.loads(archive.read("config.json"))
    if path.suffix == ".keras":
        raise StudyError(f"{path} is not a Keras model: a .keras file is a zip archive, and this one is not")
    with path.open("rb") as file:
        if file.read(8) != b"\x89HDF\r\n\x1a\n":
            raise StudyError(f"{path} is not a Keras model Keras can load (File format not supported: a saved Keras "
                             f"model is a .keras zip archive or an .h5 file)")
    import h5py

    with h5py.File(path, "r") as h5:
        config = h5.attrs.get("model_config")
    if config is None:
        raise WeightsOnly("weights only: an HDF5 file without a model_config")
    return json.loads(config.decode() if isinstance(config, bytes) else config)


def walk(config: dict) -> ConfigAnswer:
    """Every recurrent layer of a saved model config, with the mask that reaches it; see the module's docstring."""
    answer = ConfigAnswer()
    walker = _Walker(answer)
    if _custom(config):
        walker.unknown(config, config.get("class_name", "model"))
    else:
        walker.model(config, "", False, top=True)
    return answer


#: the mask a tensor carries: who made it ("Embedding 'embedding'"), False for none, None where the config cannot tell
Mask = str | bool | None


class _Walker:
    def __init__(self, answer: ConfigAnswer) -> None:
        self.answer = answer

    def model(self, entry: dict, prefix: str, mask: Mask, *, top: bool = False) -> Mask:
        """Walk a model's layers with the mask its inputs carry; returns the mask of its (first) output."""
        config = entry.get("config") or {}
        layers = config.get("layers")
        if layers is None:
            return self.unknown(entry, prefix[:-1] or entry.get("class_name", "model"))
        if top:
            self.answer.batch = _batch(entry)
        if entry.get("class_name") == "Sequential" or not any(layer.get("inbound_nodes") for layer in layers):
            for layer in layers:
                mask = self.layer(layer, prefix, mask)
            return mask
        # functional: Keras recorded the mask its propagation gave each call; inside a model that receives a mask it
        # recorded none (the model was built without), so there the mask is carried layer by layer as well
        carried: dict[tuple[str, int], Mask] = {}
        for layer in layers:
            name = layer.get("name") or layer["config"].get("name", "")
            nodes = layer.get("inbound_nodes") or []
            if not nodes:  # an input
                carried[(name, 0)] = mask
            for index, node in enumerate(nodes):
                sources, recorded = _node(node)
                received = [carried.get(source, False) for source in sources]
                if layer.get("class_name") in MASK_MERGERS:
                    received = [next((m for m in received if m), None if None in received else False)]
                first = received[0] if received else False
                if recorded:
                    given = first or f"the mask passed with mask= (from {recorded!r})"
                else:
                    given = first if mask is not False or not _takes_mask(layer) else False
                carried[(name, index)] = self.layer(layer, prefix, given)
        outputs = config.get("output_layers") or []
        first_output = outputs[0] if outputs and isinstance(outputs[0], list) else outputs
        return carried.get((first_output[0], first_output[1]), False) if len(first_output) >= 2 else False

    def layer(self, entry: dict, prefix: str, mask: Mask) -> Mask:
        """Record what `entry` holds; returns the mask of its output."""
        cls = entry.get("class_name", "")
        config = entry.get("config") or {}
        name = config.get("name") or entry.get("name") or cls.lower()
        if cls in KERAS2_CUDNN:  # named in no Keras 3 module: not a custom class
            self.answer.found.append(Found(prefix + name, cls, config, False))
            return False  # Keras 2 refused a mask here
        if _custom(entry):
            return self.unknown(entry, prefix + name)
        if cls in MODELS:
            return self.model(entry, f"{prefix}{name}/", mask)
        if cls in OPAQUE:
            self.answer.unknown.append(Unknown(prefix + name, cls, f"{cls} runs code the config does not describe"))
            return None
        if cls in RECURRENT:
            self.recurrent(entry, prefix + name, mask)
            return mask if config.get("return_sequences") else False
        if cls == "Bidirectional":
            forward = config["layer"]
            backward = config.get("backward_layer") or {
                **forward, "config": {**forward["config"], "name": "backward_" + forward["config"].get("name", "")}}
            for direction in (forward, backward):
                self.layer(direction, f"{prefix}{name}/", mask)
            return mask if forward["config"].get("return_sequences") else False
        if cls in WRAPPERS:
            for key in WRAPPERS[cls]:
                inner = config.get(key)
                for sub in inner if isinstance(inner, list) else [inner] if inner else []:
                    mask = self.layer(sub, f"{prefix}{name}/", mask)
            return mask
        if cls in ("Embedding", "ReversibleEmbedding"):
            return f"{cls} {name!r}" if config.get("mask_zero") else False
        if cls == "Masking":
            return f"Masking {name!r}"
        if cls == "InputLayer" or cls in MASK_PASSERS or cls in MASK_MERGERS or cls in MASK_FROM_FIRST:
            return mask
        if cls == "Lambda" and config.get("mask") is not None and mask is not False:
            self.answer.undecided.append(f"the Lambda layer {name!r} computes its mask with its own function")
            return None
        return False  # every other layer drops the mask (Keras warns that it does)

    def recurrent(self, entry: dict, path: str, mask: Mask) -> None:
        config = entry["config"]
        cls = entry["class_name"]
        if mask is None:
            self.answer.undecided.append(f"whether a mask reaches {path}")
        self.answer.found.append(Found(path, cls, config, mask))  # a custom cell is told too: it has no fused form

    def unknown(self, entry: dict, path: str) -> Mask:
        self.answer.unknown.append(Unknown(path, entry.get("class_name", ""), _unknown_why(entry)))
        return None


def _unknown_why(entry: dict) -> str:
    module = entry.get("module")
    where = f"module {module!r}" if module and module != "__main__" else "the code that saved the model"
    return (f"a custom class, defined in {where}, and the config does not say whether it holds a recurrent layer or "
            f"passes a mask on; give --custom-objects MODULE to load the model through Keras")


def _custom(entry: dict) -> bool:
    """A class Keras does not define: a `.keras` config names its module, an `.h5` config only the class."""
    if "module" in entry:
        return not (entry["module"] or "").startswith("keras")
    cls = entry.get("class_name", "")
    return cls not in KERAS_LAYERS and ("trainable" in (entry.get("config") or {}) or ">" in cls)


def _takes_mask(entry: dict) -> bool:
    """Layers whose call takes a mask (Keras recorded it where its propagation gave one)."""
    cls = entry.get("class_name", "")
    return cls in RECURRENT or cls in WRAPPERS or cls in MODELS


def _node(node) -> tuple[list[tuple[str, int]], str | None]:
    """An inbound node's input tensors (layer name, node index) and the layer whose tensor was recorded as the call's
    mask (None: none was).

    Keras 3 writes `{"args": [...], "kwargs": {...}}` with tensors as `__keras_tensor__` and their `keras_history`;
    Keras 2 wrote `[[name, node_index, tensor_index, kwargs], ...]` and recorded no masks.
    """
    if isinstance(node, dict):
        sources = [tuple(t["config"]["keras_history"][:2]) for t in _tensors(node.get("args", []))]
        masks = [t["config"]["keras_history"][0] for t in _tensors(node.get("kwargs", {}).get("mask"))]
        return sources, masks[0] if masks else None
    return [(item[0], item[1]) for item in node if isinstance(item, list) and len(item) >= 2], None


def _tensors(value) -> Iterator[dict]:
    if isinstance(value, dict) and value.get("class_name") == "__keras_tensor__":
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _tensors(item)


def _batch(entry: dict) -> int | None:
    """The batch size a model's first input fixes, or None."""
    config = entry.get("config") or {}
    first = next((layer for layer in config.get("layers", []) if layer.get("class_name") == "InputLayer"), None)
    shape = (first or {}).get("config", {}).get("batch_shape") or config.get("build_input_shape")
    return shape[0] if shape and isinstance(shape[0], int) else None


# --- Keras's decision, from a layer's config -----------------------------------------------------------------


def settings(found: Found) -> KerasRecurrent:
    """What `cudnn_rules` reads, from a saved config: the values Keras's loader would give the layer."""
    config = found.config
    cell = RECURRENT.get(found.layer_type) or (config.get("cell") or {}).get("class_name", "cell")
    if found.layer_type not in ("LSTM", "GRU"):
        return KerasRecurrent(found.layer_type, cell, unroll=bool(config.get("unroll")))
    return KerasRecurrent(
        found.layer_type, cell, use_cudnn=config.get("use_cudnn", "auto"),
        recurrent_dropout=min(1.0, max(0.0, float(config.get("recurrent_dropout") or 0.0))),
        dropout=float(config.get("dropout") or 0.0), activation=_activation(config.get("activation", "tanh"), "tanh"),
        recurrent_activation=_activation(config.get("recurrent_activation", "sigmoid"), "sigmoid"),
        unroll=bool(config.get("unroll")), use_bias=config.get("use_bias", True) is not False,
        reset_after=config.get("reset_after", True) is not False, implementation=int(config.get("implementation", 2)),
        compute_dtype=_compute_dtype(config.get("dtype")))


def _activation(value, wanted: str) -> str | None:
    """None where Keras's loader gives back the function `cudnn_ok` accepts; else the activation in words."""
    if value is None:
        value = "linear"
    if isinstance(value, str):
        return None if value == wanted else repr(value)
    cls = value.get("class_name")
    if cls == "function":
        name = value.get("config")
        module = value.get("module") or ""
        if module == "builtins" or module.startswith("keras"):  # Keras looks the name up among its activations
            return None if name == wanted else repr(name)
        return f"{module.split('.')[0]}.{name}"
    if cls == "__lambda__":
        return "a lambda"
    return f"a {cls} layer"


def _compute_dtype(policy) -> str:
    """A dtype policy's compute dtype: 'mixed_float16' computes in float16; a quantized one in its source's."""
    if isinstance(policy, dict):
        config = policy.get("config") or {}
        policy = config.get("name") or config.get("source_name") or "float32"
    name = str(policy or "float32")
    return name.split("_")[-1] if name.startswith(("mixed_", "int", "float8")) and "_" in name else name


def explain_found(found: Found, backend: str) -> Explanation:
    """Keras's decision for one layer on `backend`, explained for a machine with a CUDA GPU and cuDNN; a mask that
    may reach it (`masked` None) is taken as none."""
    return explain_on_gpu(found.path, settings(found), backend, masked=bool(found.masked))


def checked_backend(backend: UserBackend | str | None = None) -> UserBackend:
    """`backend` (a name, or by default the one the user's Keras would use, `backends.user_backend`), refused in one
    line where it is none of the three Keras backends that can run on a GPU."""
    backend = UserBackend(backend, "given") if isinstance(backend, str) else backend or user_backend()
    if backend.name not in KERAS_ALL_BACKENDS:  # Keras itself would fail at import ("JAX", "")
        raise StudyError(f"Keras has no backend named {backend.name!r} ({backend.chosen_by}): its backends are "
                         f"{', '.join(KERAS_ALL_BACKENDS[:-1])} and {KERAS_ALL_BACKENDS[-1]}, spelled so")
    if backend.name not in KERAS_BACKENDS:
        raise StudyError(f"Keras's {backend.name} backend ({backend.chosen_by}) runs no recurrent layer on a GPU: "
                         f"set KERAS_BACKEND to {', '.join(KERAS_BACKENDS[:-1])} or {KERAS_BACKENDS[-1]}")
    return backend


def explain_saved_config(path: Path, *, results_root: Path | None = None,
                         backend: UserBackend | str | None = None) -> tuple[list[Finding], ConfigAnswer]:
    """Every recurrent layer of a saved model, from its config, as it would run on a CUDA GPU with cuDNN on Keras's
    `backend` (default: the one the user's Keras would use), with the cost; a custom class is a finding of its own
    that cannot tell. `StudyError` names a file that is not a saved model, `NoRecurrentLayers` one without recurrent
    layers (and no class that may hide one)."""
    answer = walk(read_config(path))
    backend = checked_backend(backend).name
    if not answer.found and not answer.unknown:
        raise NoRecurrentLayers(f"{path} has no recurrent layers (LSTM, GRU, SimpleRNN or RNN) to explain")
    findings = [_finding(found, backend, answer.batch, results_root) for found in answer.found]
    findings += [Finding(u.path, u.class_name, f"keras/{backend}", "", (Reason(
        "unknown_class", f"unknown class {u.class_name}: {u.why}"),), on_gpu=True)
        for u in answer.unknown]
    return findings, answer


def keras2_cudnn_finding(found: Found) -> Finding:
    """A Keras 2 CuDNNLSTM or CuDNNGRU: cuDNN's fused kernel or nothing, whatever the backend. Keras 3 has no such
    layer, so the note says where the layer a converted model holds instead keeps cuDNN (jax has no cuDNN GRU)."""
    from lstmstudy.observe import MEANING

    keras3 = KERAS2_CUDNN[found.layer_type]
    converted = Found(found.path, keras3, found.config, False)  # no activation in its config: Keras 3's defaults
    lost = {b: there for b in KERAS_BACKENDS if not (there := explain_found(converted, b)).fused_eligible}
    kept = f" on {' and '.join(b for b in KERAS_BACKENDS if b not in lost)}" if lost else ""
    otherwise = "".join(f"; on {b} it would run {MEANING[there.kernel]}: {'; '.join(r.message for r in there.reasons)}"
                        for b, there in lost.items())
    note = Reason("keras2_cudnn", f"Keras 2's {found.layer_type} always runs cuDNN's fused kernel, with no fallback "
                                  f"(without a GPU it fails outright); Keras 3 has no such layer and loads this model "
                                  f"only after conversion to keras.layers.{keras3}, whose defaults (tanh, sigmoid, a "
                                  f"bias{', reset_after=True' if keras3 == 'GRU' else ''}) keep cuDNN's fused kernel"
                                  f"{kept}{otherwise}")
    return Finding(found.path, found.layer_type, "keras 2", "cudnn", (), (note,), on_gpu=True)


def _finding(found: Found, backend: str, batch: int | None, results_root: Path | None) -> Finding:
    if found.layer_type in KERAS2_CUDNN:
        return keras2_cudnn_finding(found)
    layer = settings(found)
    explanation = explain_on_gpu(found.path, layer, backend, masked=bool(found.masked))
    notes = explanation.notes + tuple(other_backend_notes(layer, backend, explanation))
    if found.masked is None:
        reason = Reason("mask_unknown", "cannot tell from the config whether a mask reaches this layer (a class "
                                        "upstream passes or makes masks in its own code)")
        if backend in MASK_BLOCKS:  # there any mask means the generic loop: the kernel is not known
            return Finding(found.path, found.layer_type, explanation.framework, "", (reason,), notes, on_gpu=True)
        notes += (reason,)
    elif found.masked and explanation.fused_eligible:
        notes += (right_padded_only_note(found.masked),)
    cost = None if explanation.fused_eligible else measured_cost(
        explanation.codes, layer_type=found.layer_type, batch=batch, hidden=found.config.get("units"),
        framework=explanation.framework, root=results_root)
    return Finding(found.path, found.layer_type, explanation.framework, explanation.kernel, explanation.reasons,
                   notes, on_gpu=True, cost=cost)


#: how an answer was found, for the reader and `--json`
FROM_CONFIG = "read from the saved config; Keras not loaded"


def explain_model(path: Path, *, results_root: Path | None = None, custom_objects: tuple[str, ...] = (),
                  backend: UserBackend | str | None = None) -> tuple[list[Finding], str]:
    """A saved model's findings and how they were found: from its config (`explain_saved_config`), or by loading it
    through Keras (`watch.explain_saved_model`) where the user's `custom_objects` modules define its custom classes,
    or where the config cannot tell what Keras would (and nothing in it is a class Keras could not load either)."""
    if custom_objects:
        read_config(path)  # a file that is no saved model is refused before Keras is imported
        for name in custom_objects:
            import_custom_objects(name)
        how = f"loaded through Keras, with {', '.join(custom_objects)} imported for its custom classes"
    else:
        findings, answer = explain_saved_config(path, results_root=results_root, backend=backend)
        if not answer.undecided or answer.unknown:
            return findings, FROM_CONFIG
        how = f"loaded through Keras, because the config cannot tell {'; '.join(answer.undecided)}"
    from lstmstudy.watch import explain_saved_model

    return explain_saved_model(path, results_root=results_root), how


def import_custom_objects(name: str) -> None:
    """Import the user's module that defines (and registers) a model's custom classes: a module name importable from
    the working directory, or a .py file."""
    import importlib
    import importlib.util

    try:
        if name.endswith(".py"):
            spec = importlib.util.spec_from_file_location(Path(name).stem, name)
            if spec is None or spec.loader is None:
                raise ImportError(f"no such file: {name}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            importlib.import_module(name)
    except Exception as exc:  # the user's module may fail in any way; say how in one line
        raise StudyError(f"cannot import --custom-objects {name}: {type(exc).__name__}: {exc}") from None
