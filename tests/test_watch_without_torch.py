"""`lstmstudy.watch` beside TensorFlow alone: a Keras user without torch installed imports it, watches a model and
gets the warning. One child process refuses torch at import (as where it is not installed), with Keras on its
TensorFlow backend, and the tests read its answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import import_blocker

from lstmstudy.backends import importable

pytestmark = pytest.mark.skipif(not (importable("tensorflow") and importable("keras")),
                                reason="needs TensorFlow and Keras")

CHILD = import_blocker(refused=("torch",)) + textwrap.dedent("""
    import json, warnings
    import numpy as np
    import keras
    from lstmstudy.watch import FallbackWarning, WatchCallback, watching

    model = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(4, activation="relu"), keras.layers.Dense(1)])
    model.compile(loss="mse")
    x, y = np.ones((8, 5, 3), "float32"), np.ones((8, 1), "float32")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with watching(model) as watch:
            model(x)
        callback = WatchCallback()
        model.fit(x, y, epochs=1, verbose=0, callbacks=[callback])
    said = [str(w.message) for w in caught if isinstance(w.message, FallbackWarning)]
    print("RESULT" + json.dumps({
        "backend": keras.backend.backend(), "said": said,
        "codes": [sorted(r.code for r in f.reasons) for f in watch.findings + callback.findings],
        "torch": sorted(m for m in sys.modules if m.split(".")[0] == "torch")}))
""")


@pytest.fixture(scope="module")
def without_torch() -> dict:
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.split("RESULT", 1)[1])


def test_the_watch_warns_on_tensorflow_with_torch_refused(without_torch):
    assert without_torch["backend"] == "tensorflow" and without_torch["torch"] == []
    assert len(without_torch["said"]) == 2  # the context manager's, and the callback's during fit
    assert all("activation is 'relu'" in said for said in without_torch["said"])
    assert without_torch["codes"] == [["activation"]] * 2  # the reasons on a GPU: the machine is not one
