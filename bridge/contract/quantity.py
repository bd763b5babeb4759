"""Kubernetes resource quantities, exactly: the one grammar both products use.

Owns: apimachinery's resource.Quantity as the API server reads it (`500m`, `1.5`, `2Gi`, `1e3`,
`1E`, `1Ei`, a YAML/JSON number), the value it stores (rounded up to whole nano-units, its
magnitude capped at 2^63-1) and the two roundings callers take from it: `milli_value` (CPU,
rounded up to whole milli-units) and `value` (bytes, rounded up). `try`'s manifests
(bridge.kube) and koordinator-qos's annotations (through the policy SDK) both parse here.
Must not: know which resource a quantity belongs to, or where it came from (callers name the
document and the field in their own errors).

The grammar (apimachinery, `resource/quantity.go`):

    quantity ::= sign? number suffix
    number   ::= digits | digits "." digits? | "." digits
    suffix   ::= "" | n | u | m | k | M | G | T | P | E        decimal SI
               | Ki | Mi | Gi | Ti | Pi | Ei                   binary SI
               | (e | E) sign? digits                          decimal exponent

`E` alone is exa (10^18); `E` followed by digits is an exponent. The JSON decoder trims
surrounding white space before parsing.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

_QUANTITY = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)(.*)", re.DOTALL)
_EXPONENT = re.compile(r"[eE]([+-]?\d+)")
_SUFFIX: dict[str, Fraction] = {
    "": Fraction(1), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 10**3),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
# apimachinery caps a parsed quantity's magnitude at the largest int64 ("a simple cap") and
# rounds a non-zero value up to whole nano-units, so that asking for a little gets a little.
MAX_MAGNITUDE = Fraction(2**63 - 1)
NANO = Fraction(1, 10**9)
_EXAMPLE = "expected a quantity like 500m, 2 or 1Gi"


class QuantityError(ValueError):
    """Not a Kubernetes quantity; the message says what was given."""


def parse_quantity(text: object) -> Fraction:
    """The exact value of a quantity string (a YAML/JSON number is accepted too)."""
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise QuantityError(f"{_EXAMPLE}, got {text!r}")
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"{_EXAMPLE}, got {text!r}")
        # The API server reads the number's decimal text, not its binary value: 0.1 is 1/10.
        return _stored(Fraction(repr(text)))
    if isinstance(text, int):
        return _stored(Fraction(text))
    return _parse_text(text)


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise QuantityError(f"{_EXAMPLE}, got {text!r}")
    sign, number, suffix = match.groups()
    value = Fraction(number.rstrip(".") or "0")
    if suffix in _SUFFIX:
        value *= _SUFFIX[suffix]
    else:
        exponent = _EXPONENT.fullmatch(suffix)
        if exponent is None:
            raise QuantityError(f"{_EXAMPLE}, got {text!r} (unknown suffix {suffix!r})")
        value *= Fraction(10) ** _bounded_exponent(int(exponent.group(1)), len(number))
    return _stored(-value if sign == "-" else value)


def _bounded_exponent(exponent: int, digits: int) -> int:
    """An exponent that gives the same stored value but stays small enough to compute: past
    these bounds any non-zero number is capped (too large) or rounded up to 1n (too small)."""
    return max(-(digits + 10), min(exponent, digits + 20))


def _stored(value: Fraction) -> Fraction:
    """The value as the API server keeps it: rounded up (away from zero) to nano-units,
    magnitude capped at 2^63-1."""
    magnitude = abs(value)
    if magnitude:
        magnitude = min(math.ceil(magnitude / NANO) * NANO, MAX_MAGNITUDE)
    return -magnitude if value < 0 else magnitude


def milli_value(quantity: Fraction) -> int:
    """Milli-units, rounded up (Quantity.MilliValue: 0.1m -> 1m)."""
    return math.ceil(quantity * 1000)


def value(quantity: Fraction) -> int:
    """Whole units, rounded up (Quantity.Value: 1.5 bytes -> 2)."""
    return math.ceil(quantity)


def value_of(text: object) -> int:
    """`value(parse(text))`: Quantity.Value() of a quantity string or number."""
    return value(parse_quantity(text))
