"""Importing the package changes nothing in the importing process: the study's settings (environment variables
for TensorFlow, Kineto and Keras, the csv module's field limit, matplotlib's look) belong to its own processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: imports every module of the package after the frameworks a user already has, and reports what moved
PROBE = r"""
import csv, importlib, json, os, pkgutil
import matplotlib, numpy, pandas, seaborn, torch  # a user's own imports: their side effects are not ours
import lstmstudy

env, limit = dict(os.environ), csv.field_size_limit()
rc = {k: repr(v) for k, v in matplotlib.rcParams.items()}
names = sorted(m.name for m in pkgutil.walk_packages(lstmstudy.__path__, "lstmstudy.")
               if m.name != "lstmstudy.__main__")  # running the command line is not importing the package
for name in names:
    importlib.import_module(name)
from lstmstudy import results
results.read_rows(results.set_path("cudnn_fallback", "cpu-epyc-f26m2-2t", results.default_root()))
after = {k: repr(v) for k, v in matplotlib.rcParams.items()}
print(json.dumps({"modules": len(names), "env": sorted(set(os.environ.items()) ^ set(env.items())),
                  "csv": [limit, csv.field_size_limit()], "rc": sorted(k for k in rc if rc[k] != after.get(k))}))
"""


def test_importing_every_module_changes_nothing_in_the_process():
    clean = {k: v for k, v in os.environ.items()
             if k not in ("KERAS_BACKEND", "LSTMSTUDY_KERAS_BACKEND_CHOSEN", "TF_CPP_MIN_LOG_LEVEL",
                          "KINETO_LOG_LEVEL")}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=clean, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["modules"] > 30
    assert found["env"] == [] and found["csv"][0] == found["csv"][1] and found["rc"] == [], found
