"""Checks of grid parameters, shared by the claims, the notebooks and the command line.

A parameter of the wrong type or value fails with a message naming it, before anything is measured.
"""

from __future__ import annotations

from collections.abc import Sequence

from lstmstudy.errors import ParameterError


def check_bool(**values: object) -> None:
    for name, value in values.items():
        if not isinstance(value, bool):
            raise ParameterError(f"parameter {name!r} must be True or False, got {value!r}")


def check_positive_ints(**values: object) -> None:
    """Each value is a non-empty list of positive integers (a grid axis)."""
    for name, value in values.items():
        if (not isinstance(value, (list, tuple)) or not value
                or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in value)):
            raise ParameterError(f"parameter {name!r} must be a non-empty list of positive integers, got {value!r}")


def check_positive_number(**values: object) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ParameterError(f"parameter {name!r} must be a positive number, got {value!r}")


def check_choices(name: str, value: Sequence[str], allowed: Sequence[str]) -> None:
    if not isinstance(value, (list, tuple)) or not value or any(v not in allowed for v in value):
        raise ParameterError(f"parameter {name!r} must be a non-empty list drawn from {list(allowed)}, got {value!r}")
