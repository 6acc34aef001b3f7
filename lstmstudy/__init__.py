"""lstmstudy: a reproducible study of LSTM performance on GPUs and CPUs.

Helpers meant for your own notebooks: `lstmstudy.timing.measure`, `lstmstudy.kernels.build`,
`lstmstudy.kernels.criteria.explain_cudnn`, `lstmstudy.watch.watching` (a `FallbackWarning` for each recurrent
layer that misses cuDNN, and `lstmstudy.watch.WatchCallback` for `model.fit`), `lstmstudy.nvml.GpuMonitor`,
`lstmstudy.hardware.fingerprint`. Import them from their modules: `import lstmstudy` alone stays light (no
torch, no Keras), so that rendering the book needs none of the measuring stack.
"""

import os

# TensorFlow's C++ start-up logging (CUDA probing, CPU feature notes) would fill every notebook page;
# errors still show. Set before anything imports TensorFlow; a value the user set wins.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The same for the PyTorch profiler's Kineto start-up lines (the kernel observer profiles every point).
os.environ.setdefault("KINETO_LOG_LEVEL", "5")

from lstmstudy.backends import choose_keras_backend

# Before anything imports Keras: without TensorFlow, Keras runs on its torch backend (see backends).
choose_keras_backend()

__version__ = "0.1.0"
