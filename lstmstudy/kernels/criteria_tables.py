"""The explainer's answers as the claim pages show them: which kernel each setting gets, and why.

`triggers` lists the settings that break cuDNN's criteria (claim 1); `masks` the padding and masking cases
(claim 5), Keras on each of its three GPU backends and PyTorch on a GPU and a CPU. `lstmstudy.explained` stores
both where the pages read them, so that rendering needs none of the frameworks asked here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from lstmstudy import data
from lstmstudy.backends import KERAS_BACKENDS, import_keras, keras_backend
from lstmstudy.kernels.criteria import explain_cudnn


def triggers(keras_kernels: Sequence[str], device: str = "cuda") -> pd.DataFrame:
    """For each Keras kernel (`keras.cudnn_auto` first) and each PyTorch setting: the kernel the explainer
    says it gets on `device` ('cuda': a machine with a GPU, whether or not this one has one), every reason."""
    from torch import nn

    from lstmstudy.kernels import spec

    keras = import_keras()
    rows = []
    for name in ["keras.cudnn_auto", *(k for k in keras_kernels if k != "keras.cudnn_auto")]:
        layer = keras.layers.LSTM(8, **spec(name).options)
        layer.build((1, 4, 4))
        rows.append((name, explain_cudnn(layer, device=device)[0]))
    left_padded = np.array([[False, True, True, True]])
    rows.append(("keras.cudnn_auto + left-padded mask",
                 explain_cudnn(keras.layers.LSTM(8), mask=left_padded, device=device)[0]))
    torch_settings = {"nn.LSTM": nn.LSTM(4, 8, batch_first=True),
                      "nn.LSTM(proj_size=4)": nn.LSTM(4, 8, batch_first=True, proj_size=4)}
    for name, module in torch_settings.items():
        rows.append((name, explain_cudnn(module, device=device)[0]))
    return pd.DataFrame([{"configuration": name, "kernel": e.kernel, "fused": e.fused_eligible,
                          "why not the fused kernel": "; ".join(r.message for r in e.reasons) or "-"}
                         for name, e in rows])


def keras_mask_rows() -> list[dict]:
    """Which kernel a Keras LSTM gets on a GPU with a right-padded, a left-padded or no mask (this backend)."""
    keras = import_keras()
    right = np.array([[True, True, False, False], [True, True, True, True]])
    left = np.array([[False, False, True, True], [True, True, True, True]])
    rows = []
    for name, mask in (("right-padded mask", right), ("left-padded mask", left), ("no mask", None)):
        e = explain_cudnn(keras.layers.LSTM(8), mask=mask, device="cuda")[0]
        rows.append({"configuration": f"keras.layers.LSTM, {name}, on a GPU", "framework": e.framework,
                     "kernel": e.kernel, "fused": e.fused_eligible,
                     "why not the fused kernel": "; ".join(r.message for r in e.reasons) or "-"})
    return rows


_CHILD = ("import json; from lstmstudy.kernels.criteria_tables import keras_mask_rows; "
          "print('JSON' + json.dumps(keras_mask_rows()))")


def _keras_rows(backend: str) -> list[dict]:
    """`keras_mask_rows` under `backend`: here if it is this process's Keras backend, else in a child process."""
    if keras_backend() == backend:
        return keras_mask_rows()
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300,
                          cwd=str(Path(__file__).resolve().parents[2]))
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("JSON")), None)
    if done.returncode or line is None:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [{"configuration": f"keras.layers.LSTM on the {backend} backend", "framework": f"keras/{backend}",
                 "kernel": "?", "fused": None, "why not the fused kernel": f"could not explain: {tail}"}]
    return json.loads(line[4:])


def masks() -> pd.DataFrame:
    """Which kernel a masked Keras LSTM and a padded or packed PyTorch LSTM get, on a GPU and on a CPU.

    Keras rows are explained for a machine with a GPU on each Keras backend (the others' in child processes, so
    this process's Keras keeps its own); PyTorch rows for a GPU and for a CPU.
    """
    import torch
    from torch import nn

    rows = [row for backend in KERAS_BACKENDS for row in _keras_rows(backend)]
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 8, batch_first=True)
    x = torch.randn(2, 4, 4)
    packed = data.pack_batch(x, torch.tensor([4, 2]))
    for device in ("cuda", "cpu"):
        for name, inputs in (("padded batch", x), ("pack_padded_sequence, lengths 4 and 2", packed)):
            e = explain_cudnn(lstm, inputs=inputs, device=device)[0]
            where = "on a GPU" if device == "cuda" else "on a CPU"
            notes = [r.message for r in (*e.reasons, *e.notes) if not (device == "cpu" and r.code == "no_gpu")]
            rows.append({"configuration": f"nn.LSTM, {name}, {where}", "framework": e.framework, "kernel": e.kernel,
                         "fused": e.fused_eligible if device == "cuda" else e.kernel == "onednn",
                         "why not the fused kernel": "; ".join(notes) or "-"})
    return pd.DataFrame(rows)
