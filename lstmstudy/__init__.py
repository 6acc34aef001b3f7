"""lstmstudy: a reproducible study of LSTM performance on GPUs and CPUs.

Helpers meant for your own notebooks: `lstmstudy.timing.measure`, `lstmstudy.kernels.build`,
`lstmstudy.kernels.criteria.explain_cudnn`, `lstmstudy.watch.watching` (a `FallbackWarning` for each recurrent
layer that misses cuDNN, and `lstmstudy.watch.WatchCallback` for `model.fit`), `lstmstudy.nvml.GpuMonitor`,
`lstmstudy.hardware.fingerprint`. Import them from their modules: `import lstmstudy` alone stays light (no
torch, no Keras), so that rendering the book needs none of the measuring stack, and it changes nothing in the
process that imports it: the settings the study's own processes want are `backends.study_process`.
"""

__version__ = "0.1.0"
