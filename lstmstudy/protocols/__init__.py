"""The measuring protocols: each is a way to prepare and time a point, passed by a claim's `measure` to
`sweep.run` as its `prepare` (`sweep.Prepare`). A protocol builds what a point needs (a kernel, an energy
monitor, a profiler), runs it in the group's rounds or on its own, and returns a `contract.Prepared` or a
`contract.PointResult`. One that measures a whole group at once (the torchrun launch: N processes started
once for every point) is a `sweep.GroupProtocol`, passed in its place. Either way the sweep alone resumes,
fingerprints, stores done and failed rows, and keeps the deadline. Protocols import the measuring stack
(torch, NVML); the claims above them import none of it, so that their grids, analysis, verdicts and plots
render from stored results anywhere.
"""
