"""Kubernetes resource quantities ("500m", "16Gi", "1e3") as exact Decimals in base units, with sanity bounds."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from kubernetes.utils import parse_quantity

# Quantities beyond int64 cannot be stored by a real apiserver; such a value is bad input, not capacity.
MAX_QUANTITY = Decimal(2**63 - 1)

__all__ = ["MAX_QUANTITY", "InvalidQuantity", "quantity"]


class InvalidQuantity(ValueError):
    """A value that cannot be a real quantity; `field` is its JSON path in the object."""

    def __init__(self, field: str, value: object, why: str) -> None:
        super().__init__(f"{field}={value!r}: {why}")
        self.field = field
        self.value = value
        self.why = why


def quantity(value: object, field: str) -> Decimal:
    """Parse one quantity in base units (cores, bytes, counts); bad or absurd values raise InvalidQuantity."""
    try:
        parsed = Decimal(parse_quantity(value))
    except (ValueError, TypeError, InvalidOperation) as err:
        raise InvalidQuantity(field, value, f"not a quantity ({err})") from err
    if not parsed.is_finite():
        raise InvalidQuantity(field, value, "not finite")
    if parsed < 0:
        raise InvalidQuantity(field, value, "negative")
    if parsed > MAX_QUANTITY:
        raise InvalidQuantity(field, value, "larger than any real quantity")
    return parsed
