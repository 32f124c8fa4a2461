"""The timing plugin's option table (model/plugin/options.def), read: each option's
machine field, conversion and range.

model/plugin/options.def lists every option of the QEMU timing plugin once (name,
kind, default, range, unit, the machine field it comes from, how that field
converts, one line of doc); the plugin's C code is generated from it by macros.
This module parses the same file (one regular expression, no C compiler) and from it

- maps a machine to the plugin's options (`args`), driven by the table's field and
  conversion columns, so that a new option with a machine field needs no Python change;
- checks a machine against the options' ranges (`check`), which every machine load
  does: the same bounds the plugin enforces, found before any work starts.

It sits with the machines (which it reads, and which check themselves with it on
loading); the model platform (trapline/platforms/model/) builds the plugin, reads
its counters and renders the docs' tables from this one (plugin.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from trapline.machine.units import MachineError
from trapline.paths import MODEL, ROOT


class Machine(Protocol):
    """What the option table reads of a machine (trapline.machine.Machine, which maps itself
    with this module: a protocol here, so that the two do not import each other)."""
    plugin_args: tuple[str, ...]

    def raw(self, path: str) -> Any: ...
    def has(self, path: str) -> bool: ...
    def bytes(self, path: str) -> int: ...
    def cycles(self, path: str) -> float: ...
    def icycles(self, path: str) -> int: ...
    def ways(self, path: str) -> int: ...
    def numa_cycles(self) -> list[list[int]]: ...


PLUGIN_DIR = MODEL / "plugin"
OPTIONS_DEF = PLUGIN_DIR / "options.def"

# one OPT(...) line of options.def: name, kind, "default", min, max, "unit", "field", "conversion", "doc"
_S = r'"((?:[^"\\]|\\.)*)"'
_ROW = re.compile(rf"^OPT\((\w+), (\w+), {_S}, (\d+)[uU]?, (\d+)[uU]?, {_S}, {_S}, {_S}, {_S}\)$")
# a conversion: how [mapping] [if FLAG] [; 0|omitted without GROUP]
_CONV = re.compile(r"^(?P<how>[a-z-]+)(?: (?P<map>[^ ;]+=[^ ;]+))?(?: if (?P<flag>[\w.-]+))?"
                   r"(?:; (?P<absent>0|omitted) without (?P<group>[\w.-]+))?$")
KINDS = ("U64", "F64", "F64P", "ENUM", "STR", "LIST", "MATRIX")
HOWS = ("platform", "float", "bytes", "cycles", "frac-cycles", "ways", "count", "enum", "numa-nodes", "numa-matrix",
        "per-cycle")


@dataclass(frozen=True)
class Option:
    """One row of options.def."""
    name: str
    kind: str      # KINDS
    default: str   # as passed on the command line; "" = none (the doc says what then)
    min: int       # valid range (of each value, for a LIST or MATRIX)
    max: int
    unit: str      # for an ENUM, its values separated by |
    field: str     # the machine's dotted path, or "-" when the platform adds the option
    conv: str      # how the field converts (options.def's header has the grammar)
    doc: str

    @property
    def platform(self) -> bool:
        """Added by the platform (arch, out, numa_mem ...), not from a machine field."""
        return self.field == "-"

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self.unit.split("|")) if self.kind == "ENUM" else ()

    @property
    def how(self) -> str:
        return self._conv()["how"]

    @property
    def flag(self) -> str | None:
        """A machine field that must be true for the value (else 0)."""
        return self._conv()["flag"]

    @property
    def group(self) -> str | None:
        """A machine group without which the option is 0 or omitted (see absent)."""
        return self._conv()["group"]

    @property
    def absent(self) -> str | None:
        """'0' or 'omitted': what happens without the group."""
        return self._conv()["absent"]

    @property
    def mapping(self) -> dict[str, str]:
        """An enum conversion's field value -> option value ('*': any other)."""
        spec = self._conv()["map"] or ""
        return dict(pair.split("=", 1) for pair in spec.split(",") if pair)

    def _conv(self) -> dict[str, str | None]:
        m = _CONV.match(self.conv)
        if not m:
            raise ValueError(f"{OPTIONS_DEF.name}: option {self.name}: conversion '{self.conv}' is not "
                             f"'how [a=b,...] [if FLAG] [; 0|omitted without GROUP]'")
        return m.groupdict()

    def to_dict(self) -> dict[str, Any]:
        """As the plugin's help=json prints it."""
        return {"name": self.name, "kind": self.kind, "default": self.default, "min": self.min, "max": self.max,
                "unit": self.unit, "field": self.field, "conv": self.conv, "doc": self.doc}


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s)


def parse(text: str, where: str = "options.def") -> tuple[Option, ...]:
    """The OPT(...) rows of an options.def text, checked: known kinds and conversions, unique names."""
    rows: list[Option] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.startswith("OPT("):
            continue
        m = _ROW.match(line.strip())
        if not m:
            raise ValueError(f"{where}:{n}: not OPT(name, kind, \"default\", min, max, \"unit\", \"field\", "
                             f"\"conversion\", \"doc\"): {line.strip()}")
        name, kind, default, lo, hi, unit, field, conv, doc = m.groups()
        o = Option(name, kind, _unescape(default), int(lo), int(hi), _unescape(unit), _unescape(field),
                   _unescape(conv), _unescape(doc))
        if kind not in KINDS:
            raise ValueError(f"{where}:{n}: option {name}: kind {kind} is not one of {', '.join(KINDS)}")
        if o.how not in HOWS:
            raise ValueError(f"{where}:{n}: option {name}: conversion '{o.how}' is not one of {', '.join(HOWS)}")
        if (o.how == "platform") != o.platform:
            raise ValueError(f"{where}:{n}: option {name}: field '-' goes with conversion 'platform'")
        if any(r.name == name for r in rows):
            raise ValueError(f"{where}:{n}: option {name} is listed twice")
        rows.append(o)
    return tuple(rows)


OPTIONS: tuple[Option, ...] = parse(OPTIONS_DEF.read_text(), str(OPTIONS_DEF.relative_to(ROOT)))
BY_NAME: dict[str, Option] = {o.name: o for o in OPTIONS}


# ---------------------------------------------------------------- machine -> options

def _frac(cycles: float) -> str:
    """Fractional cycles, 4 decimals at most (the penalties are measured averages)."""
    return f"{cycles:.4f}".rstrip("0").rstrip(".") or "0"


def _value(o: Option, m: Machine) -> Any:
    f = o.field
    if o.how == "float":
        return repr(float(m.raw(f)))
    if o.how == "bytes":
        return m.bytes(f)
    if o.how == "cycles":
        return m.icycles(f)
    if o.how == "frac-cycles":
        return _frac(m.cycles(f))
    if o.how == "ways":  # the field is <group>.assoc; 'full' is the group's entries (or lines)
        return m.ways(f.rsplit(".", 1)[0])
    if o.how == "count":
        return m.raw(f)
    if o.how == "per-cycle":  # a rate (transfers per second) in transfers per core cycle
        return _frac(m.quantity(f).value / m.clock_hz)
    if o.how == "numa-nodes":
        return len(m.numa_cycles())
    if o.how == "numa-matrix":  # row-major [vCPU node][memory node]
        return ":".join(str(c) for row in m.numa_cycles() for c in row)
    if o.how == "enum":
        raw = m.raw(f)
        table = o.mapping
        return table.get(str(raw), table.get("*", raw))
    raise ValueError(f"option {o.name}: no machine value for conversion '{o.how}'")


def args(machine: Machine) -> list[str]:
    """The plugin's key=value options for a machine, in the table's order: every
    option with a machine field, converted as its row says (sizes in bytes,
    latencies in whole cycles, the measured penalties in fractional cycles, 0
    for a missing optional level or group, the NUMA options only with a numa
    group). The platform adds arch, out and the rest ('-' rows)."""
    out = []
    for o in OPTIONS:
        if o.platform:
            continue
        if o.group and not machine.has(o.group):
            if o.absent == "omitted":
                continue
            out.append(f"{o.name}=0")
            continue
        v = 0 if o.flag and not machine.raw(o.flag) else _value(o, machine)
        out.append(f"{o.name}={v}")
    return out


def check(machine: Machine) -> None:
    """Every option the machine maps to within the table's range, else one
    MachineError naming the machine field, its value and the range: the same
    bounds the plugin enforces, found before any work starts."""
    for a in machine.plugin_args:
        name, value = a.split("=", 1)
        o = BY_NAME[name]
        if o.kind in ("ENUM", "STR"):
            continue
        try:
            values = [float(v) for v in value.split(":")] if o.kind in ("MATRIX", "LIST") else [float(value)]
        except ValueError:
            values = [float("nan")]
        lo_ok = (lambda v: v > o.min) if o.kind == "F64P" else (lambda v: v >= o.min)
        if all(lo_ok(v) and v <= o.max for v in values):
            continue
        field = o.field if o.field != "-" else name
        written = machine.raw(field) if machine.has(field) else value
        unit = f" {o.unit}" if o.unit and o.unit != "-" and o.kind != "ENUM" else ""
        low = f"above {o.min}" if o.kind == "F64P" else f"from {o.min}"
        raise MachineError(f"{field}: {written} is out of range for the model ({name}={value}); "
                           f"valid: {low} to {o.max}{unit}")
