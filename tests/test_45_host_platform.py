"""The host platform's process handling: a hung kernel is killed at its
timeout (with its children) and the error carries the tail of its output; and
the host's facts that decide what a figure measures (split-lock handling)."""

import json
import time

import pytest

from trapline import hostfacts
from trapline.platforms import host


def test_hung_process_is_killed_at_timeout_with_output_tail(tmp_path):
    marker = tmp_path / "child-alive"
    script = f"for i in $(seq 1 30); do echo line$i; done; (sleep 3; touch {marker}) & sleep 100"
    t0 = time.monotonic()
    status, out, err = host.run_command(["sh", "-c", script], timeout=1.0)
    assert status is None
    assert time.monotonic() - t0 < 10
    assert "line30" in out
    tail = host.tail(out)
    assert tail.splitlines()[-1] == "line30" and len(tail.splitlines()) == host.CONSOLE_TAIL_LINES
    time.sleep(3.5)
    assert not marker.exists(), "the kernel's child survived: the process group was not killed"


def test_exit_status_and_progress_lines(tmp_path):
    seen = []
    status, out, err = host.run_command(
        ["sh", "-c", "echo 'TL exp=x kind=sample variant=v rep=0 ops=1 ns=5'; sleep 1.2; echo oops >&2; exit 3"],
        timeout=30, log=seen.append, progress_every=0.5)
    assert status == 3 and "oops" in err
    assert any("1 samples so far" in s for s in seen), seen


def test_process_without_its_marker_line_is_killed_early():
    """A guest that never reaches its init is killed long before its timeout."""
    t0 = time.monotonic()
    status, out, err = host.run_command(["sh", "-c", "echo firmware; sleep 100"], timeout=60,
                                        marker="TLG init", marker_timeout=1.0)
    assert status is None and "firmware" in out
    assert time.monotonic() - t0 < 10
    status, out, err = host.run_command(["sh", "-c", "echo 'TLG init x'; sleep 1.5; echo done"], timeout=60,
                                        marker="TLG init", marker_timeout=0.5)
    assert status == 0 and "done" in out


_CPU = "processor\t: 0\nflags\t\t: fpu sse2 {}\n"
SPLIT_LOCK = [  # (case, extra CPU flags, split_lock_mitigate, kernel command line, handling, contrast)
    ("vm-no-flags", "", "1\n", "quiet", "none", False),
    ("intel-default", "split_lock_detect", "1\n", "quiet", "trapped and throttled", True),
    ("intel-no-mitigate", "split_lock_detect", "0\n", "quiet", "trapped", False),
    ("intel-off", "split_lock_detect", "1\n", "split_lock_detect=off", "none", False),
    ("intel-fatal", "split_lock_detect bus_lock_detect", "1\n", "split_lock_detect=fatal", "fatal", True),
    ("bus-lock-only", "bus_lock_detect", "1\n", "", "debug trap after each bus lock", True),
    ("bus-lock-ratelimit", "bus_lock_detect", "1\n", "split_lock_detect=ratelimit:10", "rate-limited", True),
    ("sld-ratelimit", "split_lock_detect", "1\n", "split_lock_detect=ratelimit:10", "none", False),
]


@pytest.mark.parametrize("case,flags,mitigate,cmdline,handling,contrast", SPLIT_LOCK, ids=[c[0] for c in SPLIT_LOCK])
def test_split_lock_handling_is_read_from_the_hosts_flags_sysctl_and_command_line(
        case, flags, mitigate, cmdline, handling, contrast):
    f = hostfacts.split_lock(_CPU.format(flags), mitigate, cmdline)
    assert f["handling"] == handling, f
    assert bool(f.get("contrast")) == contrast, f
    assert f["measures"], f  # the note always says what the figure is
    if contrast:
        assert "kernel" in f["measures"] or "SIGBUS" in f["measures"], f


def test_this_hosts_split_lock_facts_are_read_without_changing_them():
    before = hostfacts.SPLIT_LOCK_MITIGATE.read_text() if hostfacts.SPLIT_LOCK_MITIGATE.exists() else None
    f = hostfacts.split_lock()
    assert f["handling"] in {c[4] for c in SPLIT_LOCK}, f
    assert f["cpu_flag_split_lock_detect"] == ("split_lock_detect" in hostfacts.CPUINFO.read_text().split())
    after = hostfacts.SPLIT_LOCK_MITIGATE.read_text() if hostfacts.SPLIT_LOCK_MITIGATE.exists() else None
    assert before == after


def test_a_host_that_throttles_split_locks_makes_e3_contrast_in_entry_manifest_and_report(tmp_path, monkeypatch):
    """E3's host lane, run for real on this host, with the split-lock facts of a host that
    traps and throttles them (injected): the figure stays, the status is not-applicable,
    the note and the claim matrix say what the figure measures, the manifest records it."""
    from trapline import runner
    facts = {"cpuinfo": _CPU.format("split_lock_detect"), "mitigate": "1\n", "cmdline": "quiet\n"}
    for name, text in facts.items():
        (tmp_path / name).write_text(text)
    monkeypatch.setattr(hostfacts, "CPUINFO", tmp_path / "cpuinfo")
    monkeypatch.setattr(hostfacts, "SPLIT_LOCK_MITIGATE", tmp_path / "mitigate")
    monkeypatch.setattr(hostfacts, "CMDLINE", tmp_path / "cmdline")
    run = runner.execute("run", ["x86-split-lock"], "host", True, {}, log=lambda m: None, root=tmp_path / "results")
    e = run.entry("x86-split-lock", "host")
    assert e["status"] == "not-applicable" and e["reproduced"] > 1, e
    assert "throttles the process on purpose" in e["note"] and "not the bus lock the claim is about" in e["note"]
    assert e["platform_facts"]["host"]["split_lock"]["handling"] == "trapped and throttled"
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert manifest["platforms"]["host"]["split_lock"]["split_lock_mitigate"] == 1
    md = (run.path / "report.md").read_text()
    cell = next(line for line in md.splitlines() if line.startswith("| E3 |"))
    assert "(not-applicable)" in cell, cell  # the compact cell: figure, x claim, status
    words = next(line for line in md.splitlines() if "E3 x86-split-lock on host:" in line)  # its sentence, below
    assert "not-applicable: split locks trapped and throttled by Linux" in words, words
    assert '"handling": "trapped and throttled"' in md  # the manifest, as the report prints it


# ------------------------------------------------------------ long lanes: samples as they come, out of time

def _sample(ns: int) -> str:
    return f"TL exp=x kind=sample variant=v rep=0 ops=1 ns={ns}\n"


def test_sample_watch_stops_before_a_sample_that_cannot_end_in_time_and_logs_slow_ones():
    from trapline.kernelio import SampleWatch
    now = [0.0]
    logged = []
    w = SampleWatch("k/k a=1", limit=35, log=logged.append, clock=lambda: now[0])
    assert not w.stop() and w.next_sample_s() is None  # nothing measured yet: no reason to stop
    for t in (10, 20, 30):  # a sample every 10 s (the first one's own time is 9 s)
        now[0] = t
        w.line(_sample(9_000_000_000))
        if t < 30:
            assert not w.stop(), t  # 20 + 10 <= 35: the next one ends in time
    assert w.stop() and w.stopped_early  # 30 + 10 > 35: stopped now, not killed at 35 s
    assert len(logged) == 3 and "sample 3 (v): 9.0 s, 30 s of 35 s" in logged[-1], logged
    assert "stopped after 3 samples" in w.note() and "35 s limit" in w.note()


def test_a_command_is_stopped_when_its_next_sample_would_pass_the_limit(tmp_path):
    from trapline.kernelio import SampleWatch, parse
    script = "for i in 1 2 3 4 5 6 7 8; do sleep 0.6; echo 'TL exp=x kind=sample variant=v rep=0 ops=1 ns=600000000'; done"
    w = SampleWatch("sh", limit=2.2, log=None)
    t0 = time.monotonic()
    status, out, err = host.run_command(["sh", "-c", script], timeout=2.2, on_line=w.line, stop=w.stop)
    took = time.monotonic() - t0
    assert status is None and w.stopped_early
    assert len(parse(out).samples) == 3 and took < 2.2, (out, took)  # the 4th would have ended at 2.4 s


def test_a_host_lane_that_runs_out_of_time_reports_its_samples_with_a_note(tmp_path):
    """loop-order with far more repetitions than fit its --timeout: each command is stopped
    with the samples it took; the entry is judged on them (not failed with nothing) and
    its note says so."""
    from conftest import trapline
    root = tmp_path / "results"
    r = trapline("run", "loop-order", "--platform", "host", "--quick", "--set", "reps=1000000", "--timeout", "2",
                 env={"TRAPLINE_RESULTS": str(root)}, timeout=120)
    assert r.returncode == 0, r.stderr
    e = json.loads((root / "latest" / "entries" / "loop-order.host.json").read_text())
    assert e["status"] in ("reproduced", "differs") and e["reproduced"], e
    assert e["note"].count("the figures use the samples it took") == 2, e["note"]
    assert all(g["n"] >= 1 for g in e["groups"]) and len(e["groups"]) == 2, e["groups"]
