"""DeviceClasses: which DRA devices a class selects, by its CEL selectors evaluated with cel-cpp. Pure.

A device matches a DeviceClass when every CEL selector of the class is true for it (`device.driver`,
`device.attributes[<domain>].<name>`, `device.capacity[<domain>].<name>`, `device.allowMultipleAllocations`). A
selector that does not compile (e.g. Kubernetes' `quantity()` library, which cel-cpp lacks) matches nothing and
says why; a runtime error (an attribute the device lacks) is "no match", as the scheduler's allocator treats it.
Read by Kueue on DRA (quota resources, `scorer.kueue.dra`) and by the pending backlog (`scorer.sources.dra_demand`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cel_expr_python import cel

from accelscore.devices.dra import DraDevice

__all__ = ["DeviceClassInfo", "Selector", "cel_device", "compile_selector", "device_class"]

_ENV = cel.NewEnv(variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)})


@dataclass(frozen=True)
class Selector:
    """One compiled CEL selector (None program: it did not compile, so it matches nothing)."""

    expression: str
    program: cel.Expression | None = field(default=None, compare=False)
    error: str = ""

    def matches(self, device: DraDevice) -> bool:
        if self.program is None:
            return False
        try:
            return self.program.eval(data={"device": cel_device(device)}).value() is True
        except Exception:  # noqa: BLE001 - a runtime error (a missing attribute) is "no match", as the scheduler says
            return False


def compile_selector(expression: str) -> Selector:
    """A selector compiled once (its error kept, not raised: a class that does not compile selects nothing)."""
    try:
        return Selector(expression, _ENV.compile(expression))
    except Exception as err:  # noqa: BLE001 - cel-cpp raises RuntimeError with the checker's message
        return Selector(expression, None, str(err).splitlines()[0])


def cel_device(device: DraDevice) -> dict[str, object]:
    """The `device` variable of a DRA CEL selector: attributes and capacity grouped by domain (bare names are the
    driver's own domain)."""
    attributes: dict[str, dict[str, str | int | bool]] = {}
    for name, value in device.attributes.items():
        domain, _, short = name.rpartition("/")
        attributes.setdefault(domain or device.driver, {})[short] = value
    capacity: dict[str, dict[str, float]] = {}
    for name, amount in device.capacity.items():
        domain, _, short = name.rpartition("/")
        capacity.setdefault(domain or device.driver, {})[short] = amount
    return {"driver": device.driver, "attributes": attributes, "capacity": capacity,
            "allowMultipleAllocations": device.multiple_allocations}


@dataclass(frozen=True)
class DeviceClassInfo:
    name: str
    selectors: tuple[Selector, ...] = ()
    extended_resource: str = ""

    @property
    def errors(self) -> tuple[str, ...]:
        """Why a selector of the class does not compile (empty: every one does)."""
        return tuple(s.error for s in self.selectors if s.error)

    def matches(self, device: DraDevice) -> bool:
        return all(s.matches(device) for s in self.selectors)


def device_class(obj: Mapping[str, Any]) -> DeviceClassInfo:
    """A DeviceClass (API JSON): its CEL selectors compiled, its extendedResourceName."""
    spec = obj.get("spec") or {}
    selectors = tuple(compile_selector(str((s.get("cel") or {}).get("expression") or "false"))
                      for s in spec.get("selectors") or () if isinstance(s, Mapping))
    return DeviceClassInfo(str((obj.get("metadata") or {}).get("name") or ""), selectors,
                           str(spec.get("extendedResourceName") or ""))
