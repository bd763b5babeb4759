"""Kubernetes resource quantities (``500``, ``2k``, ``2Gi``, ``1.5``, ``100m``, ``1e3``).

Only what koordinator's annotations carry: parse a quantity string and take its integer
``Value()`` (rounded up, as Kubernetes does). Raises ``ValueError`` with a readable message.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

_NUMBER = re.compile(r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)(.*)$")
_EXPONENT = re.compile(r"^[eE]([+-]?\d+)$")
_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}


def parse_quantity(text: object) -> Fraction:
    """The exact value of a quantity; a JSON number is accepted as well as a string."""
    if isinstance(text, bool):
        raise ValueError(f"not a quantity: {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise ValueError(f"not a quantity: {text!r}")
        return Fraction(text)
    if not isinstance(text, str):
        raise ValueError(f"not a quantity: {text!r}")
    match = _NUMBER.match(text.strip())
    if match is None:
        raise ValueError(f"not a quantity: {text!r}")
    sign, digits, suffix = match.groups()
    number = Fraction(digits if not digits.endswith(".") else digits[:-1])
    if suffix in _SUFFIXES:
        number *= _SUFFIXES[suffix]
    else:
        exp = _EXPONENT.match(suffix)
        if exp is None:
            raise ValueError(f"not a quantity: {text!r} (unknown suffix {suffix!r})")
        power = int(exp.group(1))
        if abs(power) > 30:
            raise ValueError(f"not a quantity: {text!r} (exponent out of range)")
        number *= Fraction(10) ** power
    return -number if sign == "-" else number


_INTEGER_SCALE = {k: int(v) for k, v in _SUFFIXES.items() if v.denominator == 1}
_PLAIN = re.compile(r"^(\d+)([kMGTPE]i?)?$")


def quantity_value(text: object) -> int:
    """``Quantity.Value()``: the value rounded up to an integer."""
    if isinstance(text, str):
        return _string_value(text)
    return math.ceil(parse_quantity(text))


@lru_cache(maxsize=4096)
def _string_value(text: str) -> int:
    # Fast path for what annotations almost always carry: "500", "2k", "8Gi".
    match = _PLAIN.match(text)
    if match is not None and (match.group(2) or "") in _INTEGER_SCALE:
        return int(match.group(1)) * _INTEGER_SCALE[match.group(2) or ""]
    return math.ceil(parse_quantity(text))
