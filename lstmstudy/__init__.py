"""lstmstudy: a reproducible study of LSTM performance on GPUs and CPUs.

Helpers meant for your own notebooks: `lstmstudy.timing.measure`, `lstmstudy.kernels.build`,
`lstmstudy.kernels.criteria.explain_cudnn`, `lstmstudy.nvml.GpuMonitor`, `lstmstudy.hardware.fingerprint`.
"""

__version__ = "0.1.0"
