"""The checks a machine description must pass beyond its schema, as sentences
that name the field ("caches.l1d.line needs to be a power of two (got 48B)"),
grouped by component: names and claims, provenance, cpi, caches, memory, NUMA,
TLBs, unaligned accesses, the remaining times (atomics, traps), prefetch and
register windows. Each reads the typed numbers (typed.Quantities); a field
whose text did not parse is reported where its check reads it.
"""

from __future__ import annotations

from contextlib import contextmanager

from typing import Any

from trapline.machine import paths, provenance, schema
from trapline.machine.typed import Quantities, build
from trapline.machine.units import MachineError, fmt_size
from trapline.yamlfile import schema_errors

LEVELS = ("l1i", "l1d", "l2", "l3")



@contextmanager
def collected(errs: list[str]):
    """Run a check; a number that does not parse becomes one more error sentence, not a stop."""
    try:
        yield
    except MachineError as e:
        errs.append(str(e))

def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


class _Machine:
    """What a check reads: the data as written (`raw`) and the typed numbers (`q`)."""

    def __init__(self, data: dict, q: Quantities):
        self.data, self.q = data, q

    def raw(self, path: str) -> Any:
        return paths.get(self.data, path)


def names_and_claims(m: _Machine, stem: str | None, ids: set[str] | None) -> list[str]:
    errs = []
    if stem is not None and m.data["name"] != stem:
        errs.append(f"name: '{m.data['name']}' needs to equal the file name '{stem}'")
    if ids is not None:
        for i, c in enumerate(m.data["claims"]):
            if c not in ids:
                errs.append(f"claims[{i}]: '{c}' is not a claim in shared/claims.md; valid choices: "
                            f"{', '.join(sorted(ids, key=lambda x: int(x[1:])))}")
    return errs


def every_number_has_a_source(m: _Machine, ids: set[str] | None) -> list[str]:
    """Every group with a source and every {value, source} field has a complete provenance;
    a derived number equals its expression; no number is without a source."""
    errs = []
    for where, v in paths.nodes(m.data):
        if isinstance(v, dict) and "source" in v:
            errs.extend(provenance.check(v, where, ids))
    errs.extend(provenance.check_derived(m.data))
    for path, value, prov in provenance.numeric_leaves(m.data):
        if not prov.get("source"):
            errs.append(f"{path}: the number {value!r} has no source; give its group a 'source' or write it "
                        "as {value, source}")
    return errs


def cpi_is_positive(m: _Machine) -> list[str]:
    cpi = m.raw("cpi")
    if isinstance(cpi, bool) or not isinstance(cpi, (int, float)) or cpi <= 0:
        return [f"cpi: needs to be a number of cycles per instruction above 0 (got {cpi!r})"]
    return []


def caches_have_whole_sets_and_grow_towards_memory(m: _Machine) -> list[str]:
    """Each level is whole power-of-two sets of power-of-two lines; latency increases and
    lines may only grow towards main memory; an L2 or L3 says its inclusion; memory is
    slower than the last level."""
    errs: list[str] = []
    caches, q, raw = m.data["caches"], m.q, m.raw
    lat: dict[str, float] = {}
    for lvl in LEVELS:
        if lvl not in caches:
            continue
        at = f"caches.{lvl}"
        try:
            s, line = q.bytes(f"{at}.size"), q.bytes(f"{at}.line")
            lat[lvl] = q.cycles(f"{at}.latency")
        except MachineError as e:
            errs.append(str(e))
            continue
        assoc = raw(f"{at}.assoc")
        if not _pow2(line):
            errs.append(f"{at}.line needs to be a power of two (got {raw(at + '.line')})")
            continue
        ways = s // line if assoc == "full" else assoc
        if not isinstance(ways, int) or isinstance(ways, bool) or ways < 1:
            errs.append(f"{at}.assoc needs to be a whole number of ways or 'full' (got {assoc!r})")
            continue
        one_set = ways * line
        if s < one_set:
            errs.append(f"{at}.size ({raw(at + '.size')}) is smaller than one set "
                        f"(assoc {ways} x line {raw(at + '.line')})")
        elif s % one_set:
            errs.append(f"{at}.size ({raw(at + '.size')}) needs to be a whole number of sets "
                        f"(assoc {ways} x line {raw(at + '.line')} = {fmt_size(one_set)})")
        elif not _pow2(s // one_set):
            errs.append(f"{at}.size ({raw(at + '.size')}) gives {s // one_set} sets of "
                        f"assoc {ways} x line {raw(at + '.line')}; the set count needs to be a power of two")
        if lat[lvl] < 0:
            errs.append(f"{at}.latency needs to be at least 0 (got {raw(at + '.latency')})")
        if lvl in ("l2", "l3") and "inclusion" not in caches[lvl]:
            errs.append(f"{at}: needs 'inclusion' (inclusive, exclusive or non-inclusive) for a lower level")
    if "l3" in caches and "l2" not in caches:
        errs.append("caches.l3: needs a caches.l2 above it")
    order = [lv for lv in ("l1d", "l2", "l3") if lv in lat]
    for upper, lower in zip(order, order[1:]):
        if lat[lower] <= lat[upper]:
            errs.append(f"caches.{lower}.latency ({raw(f'caches.{lower}.latency')}) needs to be more than "
                        f"caches.{upper}.latency ({raw(f'caches.{upper}.latency')})")
    for lower in ("l2", "l3"):
        if lower in caches:
            for upper in ("l1i", "l1d"):
                try:
                    if q.bytes(f"caches.{lower}.line") < q.bytes(f"caches.{upper}.line"):
                        errs.append(f"caches.{lower}.line ({raw(f'caches.{lower}.line')}) is smaller than "
                                    f"caches.{upper}.line ({raw(f'caches.{upper}.line')}); a lower level "
                                    "needs lines at least as large")
                except MachineError:
                    pass
    try:
        mem = q.cycles("memory.latency")
        if order and mem <= lat[order[-1]]:
            text = raw("memory.latency")
            errs.append(f"memory.latency ({text}{'' if 'cycle' in str(text) else f' = {mem:g} cycles'}) needs to "
                        f"be more than caches.{order[-1]}.latency ({raw(f'caches.{order[-1]}.latency')})")
    except MachineError as e:
        errs.append(str(e))
    return errs


def numa_is_square_and_positive(m: _Machine) -> list[str]:
    """numa.nodes is at least 1; numa.latency_ns has one row and one column per node, every entry above 0; interleaving
    needs a power-of-two granularity."""
    errs: list[str] = []
    numa = m.data.get("numa")
    if numa is None:
        return errs
    n = paths.unwrap(numa["nodes"])
    rows = numa["latency_ns"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        errs.append(f"numa.nodes needs to be a whole number of nodes, at least 1 (got {n!r})")
    elif len(rows) != n or any(len(row) != n for row in rows):
        errs.append(f"numa.latency_ns needs {n} rows of {n} (one per node; numa.nodes is {n}), "
                    f"got {len(rows)} rows of {', '.join(str(len(r)) for r in rows)}")
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            with collected(errs):
                if m.q.cycles(f"numa.latency_ns[{i}][{j}]") <= 0:
                    errs.append(f"numa.latency_ns[{i}][{j}]: needs to be above 0 (got {paths.unwrap(v)})")
    if paths.unwrap(numa.get("interleave")) is True and "interleave_granularity" not in numa:
        errs.append("numa.interleave is true, so it needs numa.interleave_granularity (e.g. 64B: lines "
                    "alternate between the nodes)")
    if "interleave_granularity" in numa:
        with collected(errs):
            if not _pow2(m.q.bytes("numa.interleave_granularity")):
                errs.append(f"numa.interleave_granularity needs to be a power of two "
                            f"(got {m.raw('numa.interleave_granularity')})")
    return errs


def tlbs_have_whole_sets_and_one_page(m: _Machine) -> list[str]:
    """Entries are a whole number, at least 1, and a multiple of the associativity; the ITLB
    and DTLB share one page size."""
    errs: list[str] = []
    pages = {}
    for t in ("itlb", "dtlb", "stlb"):
        if t not in m.data["tlb"]:
            continue
        at = f"tlb.{t}"
        entries, assoc = m.raw(f"{at}.entries"), m.raw(f"{at}.assoc")
        ways = entries if assoc == "full" else assoc
        if not isinstance(entries, int) or isinstance(entries, bool) or entries < 1:
            errs.append(f"{at}.entries needs to be a whole number of entries, at least 1 (got {entries!r})")
        elif isinstance(ways, int) and not isinstance(ways, bool) and ways >= 1:
            if entries < ways or entries % ways:
                errs.append(f"{at}.entries needs to be a multiple of its associativity "
                            f"(got {entries} entries, assoc {assoc})")
        else:
            errs.append(f"{at}.assoc needs to be a whole number of ways or 'full' (got {assoc!r})")
        try:
            m.q.cycles(f"{at}.latency" if t == "stlb" else f"{at}.miss_penalty")
            if t != "stlb":
                pages[t] = m.q.bytes(f"{at}.page")
                if not _pow2(pages[t]):
                    errs.append(f"{at}.page needs to be a power of two (got {m.raw(at + '.page')})")
        except MachineError as e:
            errs.append(str(e))
    if len(pages) == 2 and pages["itlb"] != pages["dtlb"]:
        errs.append(f"tlb.itlb.page ({m.raw('tlb.itlb.page')}) and tlb.dtlb.page ({m.raw('tlb.dtlb.page')}) "
                    "differ; the timing model uses one page size")
    return errs


def unaligned_has_one_penalty(m: _Machine) -> list[str]:
    """Widths done in hardware are all 'hw' or all 'hw-penalty'; a penalty needs a width that pays it."""
    errs: list[str] = []
    ua = m.data["unaligned"]
    modes = {ua["w2"], ua["w4"], ua["w8"]}
    if {"hw", "hw-penalty"} <= modes:
        errs.append("unaligned: widths mix 'hw' and 'hw-penalty'; the timing model has one unaligned penalty, "
                    "so use one of them for every width done in hardware")
    try:
        pen = m.q.cycles("unaligned.penalty")
        m.q.cycles("unaligned.line_cross_penalty")
        if pen and "hw-penalty" not in modes:
            errs.append(f"unaligned.penalty is {m.raw('unaligned.penalty')} but no width is 'hw-penalty' "
                        "(set it to 0cycles, or mark the widths that pay it)")
    except MachineError as e:
        errs.append(str(e))
    return errs


def costs_are_not_negative(m: _Machine) -> list[str]:
    """Atomics, prefetch, trap and window costs are at least 0 cycles."""
    errs: list[str] = []
    for path in ("atomics.lock_cost", "atomics.split_lock_cost", "prefetch.trap_cost", "traps.cost",
                 "windows.spill_fill_cost"):
        if m.raw(path.split(".")[0]) is None:
            continue
        with collected(errs):
            if m.q.cycles(path) < 0:
                errs.append(f"{path}: needs to be at least 0 (got {m.raw(path)})")
    return errs


def weak_prefetches_never_trap(m: _Machine) -> list[str]:
    if m.data["prefetch"]["semantics"] == "weak":
        try:
            if m.q.cycles("prefetch.trap_cost"):
                return [f"prefetch.trap_cost is {m.raw('prefetch.trap_cost')} but weak prefetches never trap "
                        "(they are dropped on a TLB miss); set it to 0cycles or make semantics strong"]
        except MachineError:
            pass
    return []


def windows_are_sparcs(m: _Machine) -> list[str]:
    """Register windows only on sparc64, 3 to 32 of them (SPARC V9 NWINDOWS)."""
    errs: list[str] = []
    if "windows" in m.data:
        if m.data["arch"] != "sparc64":
            errs.append(f"windows: register windows are SPARC's; arch is {m.data['arch']}")
        n = m.raw("windows.count")
        if not isinstance(n, int) or not 3 <= n <= 32:
            errs.append(f"windows.count needs to be between 3 and 32 (SPARC V9 NWINDOWS), got {n!r}")
    return errs


PREFETCH_KINDS = ("next-line", "adjacent-line", "ip-stride", "stream")


def core_has_what_its_kind_needs(m: _Machine) -> list[str]:
    """An out-of-order core has a window (rob, load_queue, store_buffer, each at least 1) and a number
    of L1D MSHRs; an in-order one says what a load miss does (on_miss) and has no window; hardware
    prefetchers and MSHRs are whole numbers, prefetchers only where the core is out of order (the
    timing model runs them on the out-of-order core's timeline)."""
    errs: list[str] = []
    core = m.data.get("core")
    ooo = core is not None and core.get("kind") == "out-of-order"

    def whole(path: str, least: int) -> None:
        v = m.raw(path)
        if isinstance(v, bool) or not isinstance(v, int) or v < least:
            errs.append(f"{path} needs to be a whole number, at least {least} (got {v!r})")

    if core is not None:
        if ooo:
            for k in ("rob", "load_queue", "store_buffer"):
                if k in core:
                    whole(f"core.{k}", 1)
                else:
                    errs.append(f"core.{k}: an out-of-order core needs it (its window: rob, load_queue, store_buffer)")
            if "on_miss" in core:
                errs.append("core.on_miss is for an in-order core; an out-of-order core's window says what a miss "
                            "holds up (core.rob)")
            if "mshrs" not in m.data["caches"]["l1d"]:
                errs.append("caches.l1d.mshrs: an out-of-order core needs it (the misses it can have outstanding)")
        else:
            if "on_miss" not in core:
                errs.append("core.on_miss: an in-order core needs it (stall or stall-at-use)")
            for k in ("rob", "load_queue"):
                if k in core:
                    errs.append(f"core.{k} is an out-of-order core's window; core.kind is in-order")
            if "store_buffer" in core:
                whole("core.store_buffer", 1)
    for lvl, c in m.data["caches"].items():
        if "mshrs" in c:
            whole(f"caches.{lvl}.mshrs", 1)
        if "fill_width" in c and m.q.bytes(f"caches.{lvl}.fill_width") < 1:
            errs.append(f"caches.{lvl}.fill_width needs to be at least 1B: the bytes a cycle this level returns to "
                        f"the one above (got {m.raw(f'caches.{lvl}.fill_width')})")
        for kind in PREFETCH_KINDS:
            if kind in c.get("prefetch", {}) and not ooo and m.raw(f"caches.{lvl}.prefetch.{kind}.degree"):
                errs.append(f"caches.{lvl}.prefetch.{kind}: hardware prefetchers run on an out-of-order core's "
                            f"timeline (core.kind out-of-order); this core is "
                            f"{'in-order' if core is not None else 'not described (in order)'}; set its degree to 0 "
                            "or describe the core")
    return errs


def sentences(data: dict, stem: str | None, q: Quantities | None = None) -> list[str]:
    """Every problem of a description that passed the schema, in component order."""
    m = _Machine(data, q or build(data))
    ids = provenance.claim_ids()
    ids = set(ids) if ids is not None else None
    errs = names_and_claims(m, stem, ids) + every_number_has_a_source(m, ids)
    if m.q.clock_error is not None:
        return errs + [str(m.q.clock_error)]
    for check in (cpi_is_positive, core_has_what_its_kind_needs, caches_have_whole_sets_and_grow_towards_memory,
                  numa_is_square_and_positive,
                  tlbs_have_whole_sets_and_one_page, unaligned_has_one_penalty, costs_are_not_negative,
                  weak_prefetches_never_trap, windows_are_sparcs):
        errs.extend(check(m))
    # a number no sentence reads still has to be one
    errs.extend(str(e) for e in m.q.errors.values() if str(e) not in errs)
    return errs


def validate(data: Any, where: str = "machine", stem: str | None = None) -> Quantities:
    """Raise MachineError with every problem (schema first, then the sentences);
    return the typed numbers of a description that passes."""
    if not isinstance(data, dict):
        raise MachineError(f"{where}: needs to be a mapping of fields, not {type(data).__name__}")
    errors = schema_errors(data, schema.schema())
    if errors:
        raise MachineError(f"{where}: " + "; ".join(schema.message(e) for e in errors[:5]))
    q = build(data)
    errs = sentences(data, stem, q)
    if errs:
        raise MachineError(f"{where}: " + "; ".join(errs))
    return q
