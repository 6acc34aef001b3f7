"""Typed errors for the mistakes a user can make, so the CLI and notebooks can report them in one line."""

from __future__ import annotations


class StudyError(Exception):
    """Base class: a problem the user can fix, reported without a traceback by the CLI."""


class DeviceUnavailable(StudyError):
    """A device was asked for that this machine does not have (for example `cuda` without a GPU)."""


class InvalidShape(StudyError, ValueError):
    """An LSTM shape with a size that is not a positive integer."""


class UnknownKernel(StudyError, KeyError):
    """A kernel name that is not in the registry."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class DeviceFailed(StudyError):
    """The GPU failed in a way that leaves this process unable to use it (an illegal address, say)."""


class Skip(StudyError):
    """A configuration that cannot run here (no GPU, no bf16 support, ...); the reason is stored."""


class ResultsCorrupt(StudyError):
    """A results file that cannot be parsed; it is reported by file and line and never overwritten."""


class ParameterError(StudyError, ValueError):
    """A notebook or CLI parameter of the wrong type or value."""


class SpeedChanged(StudyError):
    """This machine runs at another speed than the run(s) that stored a set: rows of the two would be paired."""


class NoRecurrentLayers(StudyError):
    """A saved model without recurrent layers: readable, and nothing in it can miss cuDNN."""
