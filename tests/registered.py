"""Checking a list of the claims kept outside the registry (`lstmstudy.claims.registry()`) against it,
so that a forgotten entry fails with one message that names it and says where it goes."""

from __future__ import annotations

from collections.abc import Sequence


def differences(found: Sequence[str], expected: Sequence[str], where: str, *, in_order: bool = True) -> str:
    """'' where `found` holds each of `expected` once (in its order, unless not `in_order`); else one message naming
    what `where` lacks, what it lists that it should not, what it lists twice, or that its order differs."""
    found, expected = list(found), list(expected)
    missing = [e for e in expected if e not in found]
    extra = [f for f in found if f not in expected]
    twice = list(dict.fromkeys(f for f in found if found.count(f) > 1))
    problems = [f"{where} lacks {', '.join(missing)}" if missing else "",
                f"{where} lists {', '.join(extra)}, which it should not" if extra else "",
                f"{where} lists {', '.join(twice)} more than once" if twice else ""]
    if not any(problems) and in_order and found != expected:
        problems.append(f"{where} is out of order: {', '.join(found)}; the registry's order is {', '.join(expected)}")
    return "; ".join(p for p in problems if p)
