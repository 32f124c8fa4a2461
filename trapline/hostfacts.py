"""Facts of the host machine that decide what a host figure measures.

An experiment's host lane names the facts its figure depends on (`host_facts:` in
kernels/<id>/experiment.yaml); the host platform reads each one here, records it in
the entry's platform facts (and every run's manifest records them all, `describe`),
and where the host changes what the figure measures, the entry says so: a short
`caveat` for the claim matrix, a sentence for the note, and, when the figure is no
longer the claim's effect, `contrast` (the entry is not-applicable, its figure shown
beside the claim, as for an effect the host cannot have).

One fact so far:

  split_lock   how this Linux handles a locked instruction that straddles two cache
               lines (E3's bus lock). Read from the CPU flags split_lock_detect (#AC on a
               split lock) and bus_lock_detect (#DB after a bus lock) in /proc/cpuinfo,
               /proc/sys/kernel/split_lock_mitigate and the kernel command line's
               split_lock_detect= (off, warn, fatal, ratelimit:N; the default is warn on a
               CPU with either flag). Linux's arch/x86/kernel/cpu/intel.c (6.1; bus_lock.c
               since 6.9): in warn mode with split_lock_mitigate=1 every split lock traps
               (#AC) and the task sleeps 10 ms, with one core at a time allowed to run
               split locks ("misery"); fatal sends SIGBUS; ratelimit:N lets N bus locks
               a second through and sleeps the rest; a CPU with only bus_lock_detect
               takes a debug trap after every bus lock. Nothing is changed on the host:
               these are read, never written (dmesg, which says the same, is not
               readable by every user and is not used).

Each reader takes the texts it reads as arguments (default: the host's files), so
the decisions can be tested without such a host.
"""

from __future__ import annotations

import re
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
SPLIT_LOCK_MITIGATE = Path("/proc/sys/kernel/split_lock_mitigate")
CMDLINE = Path("/proc/cmdline")


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _cpu_flags(cpuinfo: str | None) -> set[str] | None:
    if cpuinfo is None:
        return None
    m = re.search(r"^flags\s*:(.*)$", cpuinfo, flags=re.M)
    return set(m.group(1).split()) if m else set()


def split_lock(cpuinfo: str | None = None, mitigate: str | None = None, cmdline: str | None = None) -> dict:
    """How this Linux handles a split lock, as facts: the CPU flags, the mode, the sysctl,
    `handling` (none, trapped, trapped and throttled, rate-limited, debug trap after each,
    fatal, unknown) and, where the figure is not the bus lock itself, `caveat` (a few
    words), `measures` (a sentence) and `contrast` (why the claim's effect cannot show)."""
    cpuinfo = _read(CPUINFO) if cpuinfo is None else cpuinfo
    mitigate = _read(SPLIT_LOCK_MITIGATE) if mitigate is None else mitigate
    cmdline = _read(CMDLINE) if cmdline is None else cmdline
    flags = _cpu_flags(cpuinfo)
    sld = flags is not None and "split_lock_detect" in flags
    bld = flags is not None and "bus_lock_detect" in flags
    m = re.search(r"(?:^|\s)split_lock_detect=(\S+)", cmdline or "")
    asked = m.group(1) if m else None
    mode = asked if asked and re.fullmatch(r"off|warn|fatal|ratelimit:\d+", asked) else "warn"
    mit = int(mitigate.strip()) if mitigate is not None and mitigate.strip().isdigit() else None
    facts: dict = {"cpu_flag_split_lock_detect": sld, "cpu_flag_bus_lock_detect": bld,
                   "split_lock_detect": (mode if sld or bld else "off") + ("" if asked else " (default)"),
                   "split_lock_mitigate": mit}
    if flags is None:
        return {**facts, "handling": "unknown", "caveat": "split-lock handling unknown",
                "measures": f"{CPUINFO} could not be read, so whether Linux traps split locks here is unknown"}
    if not (sld or bld) or mode == "off":
        why = ("split_lock_detect=off on the kernel command line" if sld or bld else
               "the CPU, as Linux sees it, has neither split_lock_detect nor bus_lock_detect (a virtual "
               "machine's kernel is not offered them)")
        return {**facts, "handling": "none",
                "measures": f"Linux does not trap split locks here ({why}): the straddling figure is the locked "
                            "add's own cost"}
    lock = "the kernel trapping and slowing the process on purpose, not the bus lock the claim is about"
    if mode == "fatal":
        return {**facts, "handling": "fatal", "caveat": "split locks are fatal here (SIGBUS)",
                "measures": "Linux sends SIGBUS on a split lock (split_lock_detect=fatal), so a straddling "
                            "locked add cannot run on this host",
                "contrast": "this host's Linux kills a process that takes a split lock (split_lock_detect=fatal)"}
    if mode.startswith("ratelimit") and bld:
        n = mode.split(":")[1]
        return {**facts, "handling": "rate-limited", "caveat": f"bus locks rate-limited by Linux to {n}/s",
                "measures": f"Linux lets {n} bus locks a second through and sleeps the process for the rest "
                            f"(split_lock_detect={mode}): the figure measures {lock}",
                "contrast": f"this host's Linux rate-limits bus locks to {n} a second (split_lock_detect={mode}), "
                            f"so the straddling figure measures {lock}"}
    if mode.startswith("ratelimit"):  # ratelimit without bus-lock detection turns #AC off
        return {**facts, "handling": "none",
                "measures": f"Linux does not trap split locks here (split_lock_detect={mode} turns #AC off on a CPU "
                            "without bus_lock_detect): the straddling figure is the locked add's own cost"}
    if sld and mit:
        return {**facts, "handling": "trapped and throttled",
                "caveat": "split locks trapped and throttled by Linux",
                "measures": "Linux traps every split lock (#AC, split_lock_detect=warn) and, with "
                            "split_lock_mitigate=1, sleeps the process 10 ms and lets one core at a time "
                            f"run split locks: the figure measures {lock}",
                "contrast": "this host's Linux traps split locks and throttles the process on purpose "
                            "(split_lock_detect=warn, split_lock_mitigate=1), so the straddling figure measures "
                            f"{lock}"}
    if sld:
        return {**facts, "handling": "trapped",
                "caveat": "a split lock trapped every few ms (not throttled)",
                "measures": "Linux traps a split lock (#AC) and then lets the core run them for two timer "
                            "ticks (split_lock_detect=warn, split_lock_mitigate=0): one trap every few "
                            "milliseconds, small beside the bus locks the figure measures"}
    return {**facts, "handling": "debug trap after each bus lock",
            "caveat": "a debug trap after every bus lock",
            "measures": "the CPU raises a debug trap after every bus lock and Linux handles it "
                        f"(bus_lock_detect, split_lock_detect={mode}): each straddling add pays a kernel entry, "
                        "so the figure measures the bus lock plus a trap",
            "contrast": "this host's Linux takes a debug trap after every bus lock (bus_lock_detect, "
                        f"split_lock_detect={mode}), so the straddling figure measures a bus lock plus a kernel trap"}


FACTS = {"split_lock": split_lock}


def names() -> list[str]:
    return sorted(FACTS)


def read(names_: list[str]) -> dict[str, dict]:
    """The host's facts called `names_`, each read now."""
    return {n: FACTS[n]() for n in names_}


def describe() -> dict[str, dict]:
    """Every fact of this host, for the manifest."""
    return read(names())


def for_lane(names_: list[str], facts: dict[str, dict] | None = None) -> dict:
    """A host lane's platform facts: the facts it names (`host_facts`; read now unless
    given), and what they say together: `caveat` (for the claim matrix), `measures` (for
    the note) and `contrast` (the entry is then not-applicable), each only where a fact
    changes what the figure measures."""
    facts = read(names_) if facts is None else facts
    out: dict = {"host": facts} if facts else {}
    for key, sep in (("caveat", "; "), ("measures", ". "), ("contrast", "; ")):
        said = [f[key] for f in facts.values() if f.get(key)]
        if said:
            out[key] = sep.join(said) + ("." if key == "measures" else "")
    return out
