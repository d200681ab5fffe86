"""The checks every request goes through, with messages that name the field, the value and what is allowed.

They live apart from config.py so that the registries (attention_core/variants/: what a variant checks of its own
sizes) and config.py can both use them without importing each other.
"""

from __future__ import annotations

import operator


def check_int(field: str, value: object, low: int, high: int, why: str = "") -> int:
    """Accept Python/NumPy integers (not bools, not floats) inside [low, high]."""
    if isinstance(value, bool):
        raise ValueError(f"{field} must be an integer between {low} and {high}; got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{field} must be an integer between {low} and {high}; got {value!r}") from None
    if not low <= number <= high:
        reason = f" ({why})" if why else ""
        raise ValueError(f"{field} must be between {low} and {high}{reason}; got {number}")
    return number


def check_bool(field: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{field} must be True or False; got {value!r}")
    return value


def check_choice(field: str, value: object, choices) -> str:
    if value not in choices:
        raise ValueError(f"{field} must be one of {', '.join(choices)}; got {value!r}")
    return value


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]
