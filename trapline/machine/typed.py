"""The numbers of one machine, typed once: every x-unit field of the schema parsed
into a `Quantity` (bytes, Hz, cycles at the machine's clock, counts), keyed by
dotted path ("caches.l1d.line", "numa.latency_ns[0][1]").

A field whose text is not a quantity keeps its error, so the checks report it
where they read the field (the order of the sentences does not change) and a
validated machine has none left.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trapline.machine import paths, schema
from trapline.machine.units import MachineError, Quantity, parse, parse_freq


@dataclass(frozen=True)
class Quantities:
    """path -> Quantity (or the MachineError its text gave); `clock_error` is set when
    the clock itself does not parse, and then no time could be converted."""
    fields: dict[str, Quantity] = field(default_factory=dict)
    errors: dict[str, MachineError] = field(default_factory=dict)
    clock_hz: float | None = None
    clock_error: MachineError | None = None

    def get(self, path: str) -> Quantity:
        """The quantity at `path`; raises its MachineError if it did not parse."""
        if path in self.fields:
            return self.fields[path]
        if path in self.errors:
            raise self.errors[path]
        raise MachineError(f"{path}: is not a number of this machine")

    def __contains__(self, path: str) -> bool:
        return path in self.fields or path in self.errors

    def value(self, path: str) -> Any:
        return self.get(path).value

    def bytes(self, path: str) -> int:
        return self._of(path, "size")

    def cycles(self, path: str) -> float:
        return self._of(path, "time")

    def _of(self, path: str, kind: str) -> Any:
        q = self.get(path)
        if q.kind != kind:
            raise MachineError(f"{path}: is a {q.kind}, not a {kind}")
        return q.value

    def under(self, prefix: str) -> list[Quantity]:
        """The quantities under `prefix` (e.g. numa.latency_ns -> its cells), in order."""
        return [q for p, q in self.fields.items() if p.startswith(prefix + "[") or p.startswith(prefix + ".")]


def build(data: dict) -> Quantities:
    """Type every number of `data` (a description that passed the schema)."""
    hz: float | None = None
    clock_error = None
    try:
        hz = parse_freq(paths.get(data, "clock"), "clock")
    except MachineError as e:
        clock_error = e
    fields: dict[str, Quantity] = {}
    errors: dict[str, MachineError] = {}
    for path, kind, text, prov, _whole in schema.quantities(data):
        if kind == "time" and hz is None:
            errors[path] = clock_error
            continue
        try:
            fields[path] = parse(path, kind, text, hz, prov)
        except MachineError as e:
            errors[path] = e
    return Quantities(fields=fields, errors=errors, clock_hz=hz, clock_error=clock_error)
