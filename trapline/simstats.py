"""The one stats format of `./run.sh simulate`, whatever platform ran the program
(trapline/schema/simulate.schema.json is its schema), and how it is printed: a
table for a person, JSON for scripts, two or more platforms side by side with
their ratios (--compare).

A platform fills `figures()` blocks (the whole run, and one per region the
program marked with kernels/common/trapline.h's TL_ROI_BEGIN/END) with the
figures it has; a figure it does not have is absent, never 0. Each figure says
what it rests on (REST): a count of what executed, a prediction from the machine
description, a measurement on this host.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

FORMAT = 1
# what a figure rests on (the schema's enum)
COUNTED = "counted"        # an event count of what executed (functional: the same on any timing)
PREDICTION = "prediction"  # from a timing model's machine description (no parameter fitted to this program)
MEASURED = "measured"      # measured on this host's CPU (real time, perf counters)
EMULATION = "emulation"    # an emulator's wall clock: not a prediction of any machine
REST = (COUNTED, PREDICTION, MEASURED, EMULATION)
# what time a run's seconds are
TIME_KINDS = ("simulated", "real", "emulation")

# the scalar figures, in the order a table prints them: (key, what it means). The one definition of
# each: every platform reports a figure in this meaning or leaves it out (the schema's descriptions).
SCALARS = (
    ("seconds", "time of the run or region; time_kind says which time"),
    ("instructions", "instructions executed, each counted once: an x86 rep-prefixed string instruction is one "
                     "however many iterations it runs (as x86's retired-instruction counters and gem5 count it; "
                     "QEMU executes it once per iteration and the model takes the repeats out). Code a program "
                     "calls can still differ between platforms: a static glibc picks memset, memcpy and the like "
                     "by the CPU features the platform reports (CPUID), so under QEMU a large memset is one rep "
                     "stosb (ERMS) and under gem5 (no ERMS, no AVX2) an SSE2 loop of about 7 instructions per 64 "
                     "bytes; compare the program's own regions"),
    ("cycles", "CPU cycles at the machine's clock"),
    ("l1i_accesses", "reads of the L1I by instruction fetch: one each time fetch moves to a line other than the "
                     "one it read last (a fetch buffer of one line: a loop inside one line reads it once; gem5's O3 "
                     "also reads lines down a mispredicted path and again after a squash); gem5 "
                     "reports it from its O3 CPU with lines of at most 64 bytes (its fetch buffer: a longer line "
                     "is read in 64-byte blocks; the timing and minor CPUs read per instruction or fetch width)"),
    ("l1i_misses", "lines filled into the L1I (a fetch of a line already being filled is not one)"),
    ("l1d_accesses", "loads and stores to the L1D (an access across two lines is two, each iteration of a rep "
                     "string instruction one)"),
    ("l1d_misses", "lines filled into the L1D on demand, by loads and stores; an access to a line already "
                   "being filled is not one (l1d_misses_in_flight), nor is a store to a line held without "
                   "write permission (gem5's upgrade: no data moves)"),
    ("l1d_misses_in_flight", "L1D accesses to a line an earlier miss (or prefetch) was still filling (gem5's MSHR "
                             "hits; the timing model's on an out-of-order core, whose fills take time: an in-order "
                             "core waits for each fill and has none)"),
    ("l2_accesses", "demand reads reaching the L2 from the L1s (their line fills); write-backs into it are not "
                    "accesses"),
    ("l2_misses", "lines the L2 filled from below on demand"),
    ("l3_accesses", "demand reads reaching the L3 from the L2; write-backs into it are not accesses"),
    ("l3_misses", "lines the L3 filled from memory on demand"),
    ("itlb_misses", "translations the ITLB had no entry for and filled"),
    ("l1d_misses_overlapped", "L1D demand misses (to a line not in the L1D and not already missed by an earlier "
                              "demand access: a miss, or the first demand access of a line a prefetch is still "
                              "filling) made while another such miss was still waiting for its line: the "
                              "memory-level parallelism of the core. An in-order core that stalls on a miss has "
                              "none; gem5 counts them with trapline's change overlap-stats (a probe on its L1D's "
                              "Miss and Fill events)"),
    ("hw_prefetches_issued", "lines the hardware prefetchers of every cache fetched (a prefetch of a line that "
                             "is there or already being filled is not one)"),
    ("hw_prefetches_useful", ("hardware-prefetched lines whose first demand access found them filled (one that meets the prefetch "
             "still on its way is late, not useful: gem5's pfUseful counts a demand hit on a prefetched block)")),
    ("dtlb_misses", "translations the DTLB had no entry for and filled: one per page missed. gem5's SE mode "
                    "also counts a lookup of a page not mapped yet: it maps a page at its first touch through "
                    "a fault, so the access that faults and its retry each count (timing CPU: 2 per newly "
                    "touched page) and on O3 so does every later access to that page already issued; a region "
                    "whose pages were touched before it counts fills alone"),
)
# the figures that are a mapping: name -> count
MAPS = (("traps", "traps by kind"), ("memory_reads_by_node", "reads that reached memory, by NUMA node"))

# what each figure of a simulator rests on: what executed is counted (the same on any timing),
# what the machine description decides is a prediction. The one table: a simulator's engine
# names only where it differs, and why (trapline/platforms/engine.py, Engine.rests_on_here)
RESTS_ON = {"seconds": PREDICTION, "cycles": PREDICTION, "instructions": COUNTED, "l1i_accesses": COUNTED,
            "l1d_accesses": COUNTED, "traps": COUNTED,
            **{k: PREDICTION for k in ("l1i_misses", "l1d_misses", "l1d_misses_in_flight", "l2_accesses", "l2_misses",
                                       "l3_accesses", "l3_misses", "l1d_misses_overlapped", "hw_prefetches_issued",
                                       "hw_prefetches_useful", "itlb_misses", "dtlb_misses",
                                       "memory_reads_by_node")}}


@dataclass
class Run:
    """What a platform's simulate() returns: the common stats, and the program's own output."""
    stats: dict
    stdout: str = ""
    stderr: str = ""
    error: str | None = None  # the program did not end by itself (timeout, crash of the guest): why, with a tail
    console: str = ""          # a guest's console (shown when the program failed)


def figures(**values) -> dict:
    """A figures block: the given figures that are known (None is dropped)."""
    out = {}
    for k, v in values.items():
        if v is None:
            continue
        if k not in dict(SCALARS) and k not in dict(MAPS):
            raise KeyError(f"simstats: '{k}' is not a figure of the common format")
        out[k] = v
    return out


def add_up(blocks: list[dict], skip: tuple[str, ...] = ()) -> dict:
    """Regions' counts added up into one (nested dicts and lists of counts alike; a key
    missing from a block keeps the others' value; keys in skip are left out): the total
    of a run from its marked regions, for every platform's simulate."""
    def add(a, b):
        if isinstance(a, dict) and isinstance(b, dict):
            return {k: add(a.get(k), b.get(k)) for k in set(a) | set(b)}
        if isinstance(a, list) and isinstance(b, list):
            return [x + y for x, y in zip(a, b)]
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
            return a + b
        return a if b is None else b
    out: dict = {}
    for g in blocks:
        out = add(out, {k: v for k, v in g.items() if k not in skip})
    return out


def stats(platform, machine, program, argv: list[str], mode: str, exit_status: int | None,
          time_kind: str, total: dict, regions: list[dict], rests_on: dict[str, str], raw) -> dict:
    """The common stats of one run (platform: its class; program: trapline.program.Program)."""
    assert time_kind in TIME_KINDS
    known = set(total) | {k for g in regions for k in g}
    return {"tool": "trapline-simulate", "format": FORMAT,
            "platform": platform.name, "platform_label": platform.label, "mode": mode,
            "machine": machine.name, "sets": list(machine.sets), "arch": machine.arch,
            "program": [program.path, *argv[1:]], "program_sha256": program.sha256,
            "exit_status": exit_status, "time_kind": time_kind,
            "total": total, "regions": regions,
            "rests_on": {k: v for k, v in rests_on.items() if k in known},
            "stats": raw}


def program_counts(output: str) -> dict[str, int]:
    """The counts a program printed itself as trapline.h's `TL ... kind=count name=N value=V`
    lines (the kernels' fixup, trap and page counts, read from /proc in a guest):
    name -> value ('name.variant' when a name repeats)."""
    from trapline import kernelio
    recs = [c for c in kernelio.parse(output).counts if str(c.get("value", "")).lstrip("-").isdigit()]
    names = [c.get("name") for c in recs]
    out = {}
    for c in recs:
        key = c["name"] if names.count(c["name"]) == 1 else f"{c['name']}.{c.get('variant', len(out))}"
        out[key] = int(c["value"])
    return out


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _rows(s: dict, block: dict) -> list[tuple[str, str]]:
    rows = [(k, block[k]) for k, _ in SCALARS if k in block]
    for k, _ in MAPS:
        for sub, n in (block.get(k) or {}).items():
            rows.append((f"{k}.{sub}", n))
    return rows


def _label(s: dict) -> str:
    return f"{s['platform']}" + (f" ({s['mode']})" if s.get("mode") else "")


def table(s: dict) -> str:
    """One run's stats for a person."""
    head = (f"{' '.join(s['program'])}\n{s['platform_label']} ({s['mode']}), machine {s['machine']}"
            f"{' with ' + ', '.join(s['sets']) if s['sets'] else ''} ({s['arch']}); exit status "
            f"{_fmt(s['exit_status'])}; time is {s['time_kind']}; program sha256 {s['program_sha256'][:16]}")
    blocks = [("total", s["total"])] + [(f"region {i}", g) for i, g in enumerate(s["regions"])]
    lines = [head]
    for name, g in blocks:
        rows = _rows(s, g)
        if not rows:
            continue
        lines.append(f"\n{name}:")
        w = max(len(k) for k, _ in rows)
        for k, v in rows:
            rest = s["rests_on"].get(k.split(".")[0], "")
            lines.append(f"  {k:<{w}}  {_fmt(v):>16}  {rest}")
    if s.get("program_counts"):
        lines.append("\ncounts the program printed (TL kind=count):")
        w = max(map(len, s["program_counts"]))
        lines += [f"  {k:<{w}}  {_fmt(v):>16}" for k, v in s["program_counts"].items()]
    return "\n".join(lines) + "\n"


def compare(runs: list[dict]) -> dict:
    """The runs' totals side by side: {"platforms": [...], "rows": [{figure, values, ratios}]},
    ratios of each run to the first."""
    names = []
    for s in runs:
        for k, _ in _rows(s, s["total"]):
            if k not in names:
                names.append(k)
    rows = []
    for k in names:
        vals = [dict(_rows(s, s["total"])).get(k) for s in runs]
        base = vals[0]
        ratios = [None if not isinstance(v, (int, float)) or not base else v / base for v in vals[1:]]
        rows.append({"figure": k, "values": vals, "ratios": ratios,
                     "rests_on": [s["rests_on"].get(k.split(".")[0]) for s in runs]})
    return {"platforms": [_label(s) for s in runs], "rows": rows}


def compare_table(runs: list[dict]) -> str:
    c = compare(runs)
    heads = ["figure"] + c["platforms"] + [f"{p} / {c['platforms'][0]}" for p in c["platforms"][1:]]
    body = [[r["figure"]] + [_fmt(v) for v in r["values"]] + ["-" if x is None else f"{x:.3f}" for x in r["ratios"]]
            for r in c["rows"]]
    w = [max(len(row[i]) for row in [heads] + body) for i in range(len(heads))]
    s0 = runs[0]
    out = [f"{' '.join(s0['program'])} on machine {s0['machine']} ({s0['arch']}); times: "
           + ", ".join(f"{_label(s)} {s['time_kind']}" for s in runs)]
    out.append("  ".join(h.ljust(w[i]) if i == 0 else h.rjust(w[i]) for i, h in enumerate(heads)))
    for row in body:
        out.append("  ".join(v.ljust(w[i]) if i == 0 else v.rjust(w[i]) for i, v in enumerate(row)))
    return "\n".join(out) + "\n"


def dumps(obj) -> str:
    return json.dumps(obj, indent=2) + "\n"


def schema() -> dict:
    """The stats' JSON schema (trapline/schema/simulate.schema.json is this, written by
    `python -m trapline.simstats --write-schema`; a test keeps the two equal)."""
    count = {"type": "integer", "minimum": 0}
    figs = {k: ({"type": "number", "minimum": 0, "description": d} if k == "seconds" else {**count, "description": d})
            for k, d in SCALARS}
    figs.update({k: {"type": "object", "description": d, "additionalProperties": count} for k, d in MAPS})
    block = {"type": "object", "additionalProperties": False, "properties": figs}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "trapline simulate stats",
        "description": "What `./run.sh simulate` prints as JSON for one platform's run of a program "
                       "(trapline/simstats.py). A figure the platform does not have is absent, never 0.",
        "type": "object",
        "required": ["tool", "format", "platform", "platform_label", "mode", "machine", "sets", "arch", "program",
                     "program_sha256", "exit_status", "time_kind", "total", "regions", "rests_on", "stats"],
        "properties": {
            "tool": {"const": "trapline-simulate"},
            "format": {"const": FORMAT},
            "platform": {"type": "string", "description": "the platform's name (--platform)"},
            "platform_label": {"type": "string", "description": "how its figures are labelled"},
            "mode": {"type": "string", "description": "user (no kernel), guest (under Linux), se (gem5 syscall "
                                                      "emulation) or native (the host)"},
            "machine": {"type": "string"},
            "sets": {"type": "array", "items": {"type": "string"}, "description": "--set machine fields"},
            "arch": {"type": "string"},
            "program": {"type": "array", "minItems": 1, "items": {"type": "string"}},
            "program_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "exit_status": {"type": ["integer", "null"], "description": "null: it did not exit by itself"},
            "time_kind": {"enum": list(TIME_KINDS), "description": "what total.seconds is"},
            "total": {**block, "description": "the whole run (guest mode: the marked regions together). Beside the "
                                              "program's own code it counts the C library's, which can differ by "
                                              "platform (instructions says why): compare regions"},
            "regions": {"type": "array", "items": block,
                        "description": "one per TL_ROI_BEGIN/END pair of kernels/common/trapline.h"},
            "rests_on": {"type": "object", "additionalProperties": {"enum": list(REST)},
                         "propertyNames": {"enum": [k for k, _ in SCALARS + MAPS]},
                         "description": "for each figure present: what it rests on"},
            "stats": {"description": "the platform's own statistics, as it wrote them"},
            "program_counts": {"type": "object", "additionalProperties": {"type": "integer"},
                               "description": "counts the program printed itself (TL kind=count lines of "
                                              "kernels/common/trapline.h), e.g. a kernel's fixups read in the guest"},
        },
    }


DOCS_BEGIN = "<!-- figures table: generated by python -m trapline.simstats --write-schema; do not edit -->"
DOCS_END = "<!-- end of the figures table -->"


def markdown() -> str:
    """docs/model.md's table of what each figure means (SCALARS and MAPS), between DOCS_BEGIN and DOCS_END."""
    rows = [f"| `{k}` | {d} |" for k, d in SCALARS + MAPS]
    return "\n".join([DOCS_BEGIN, "", "| figure | what it means, on every platform |", "|---|---|", *rows, "",
                      DOCS_END]) + "\n"


if __name__ == "__main__":
    import sys
    from pathlib import Path
    text = json.dumps(schema(), indent=2) + "\n"
    if sys.argv[1:] == ["--write-schema"]:
        here = Path(__file__)
        here.with_name("schema").joinpath("simulate.schema.json").write_text(text)
        doc = here.parent.parent / "docs" / "model.md"
        d = doc.read_text()
        doc.write_text(d[:d.index(DOCS_BEGIN)] + markdown() + d[d.index(DOCS_END) + len(DOCS_END) + 1:])
    else:
        sys.stdout.write(text)
