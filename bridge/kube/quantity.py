"""Kubernetes resource quantities, exactly (`500m`, `1.5`, `2Gi`, `1e3`, `128974848`).

Owns: the quantity grammar (apimachinery's resource.Quantity: a signed decimal with an
optional decimal SI, binary SI or exponent suffix) and the two roundings kubelet uses:
`milli_value` (CPU, rounded up to whole milli-units) and `value` (bytes, rounded up).
Must not: know which resource a quantity belongs to (bridge.kube.manifest decides).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_QUANTITY = re.compile(r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)(|[eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)$")
_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 10**3),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}


class QuantityError(ValueError):
    """Not a Kubernetes quantity; the message says what was given."""


def parse(text: object) -> Fraction:
    """The exact value of a quantity string (a YAML/JSON number is accepted too)."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise QuantityError(f"expected a quantity like 500m, 2 or 1Gi, got {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"expected a quantity like 500m, 2 or 1Gi, got {text!r}")
        return Fraction(str(text))
    match = _QUANTITY.match(text.strip())
    if match is None:
        raise QuantityError(f"expected a quantity like 500m, 2 or 1Gi, got {text!r}")
    sign, number, suffix = match.groups()
    value = Fraction(number)
    if suffix[:1] in ("e", "E"):
        value *= Fraction(10) ** int(suffix[1:])
    else:
        value *= _SUFFIX[suffix]
    return -value if sign == "-" else value


def milli_value(quantity: Fraction) -> int:
    """Milli-units, rounded up (Quantity.MilliValue: 0.1m -> 1m)."""
    return math.ceil(quantity * 1000)


def value(quantity: Fraction) -> int:
    """Whole units, rounded up (Quantity.Value: 1.5 bytes -> 2)."""
    return math.ceil(quantity)
