"""Malformed input, as a hostile but fair user would type it (CLI subsystem, 3x).

Every case must: exit non-zero (2 for a usage error), print one line on stderr
that names the field or argument and what is valid, print no traceback, write
no run directory or .incomplete state, and leave no process running.
"""

import os
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, trapline

M = ["--platform", "model"]

# (case id, argv, words the one error line must contain)
CLI = [
    ("no-command-args", ["run"], ["id"]),
    ("unknown-experiment", ["run", "no-such"], ["no-such", "loop-order"]),
    ("unknown-platform", ["run", "loop-order", "--platform", "nope"], ["nope", "host"]),
    ("planned-platform", ["run", "loop-order", "--platform", "gem5"], ["gem5", "host"]),
    ("set-without-equals", ["run", "loop-order", "--set", "rows"], ["--set", "key=value"]),
    ("set-empty-key", ["run", "loop-order", "--set", "=5"], ["--set", "key=value"]),
    ("set-unknown-kernel-key", ["run", "loop-order", "--platform", "host", "--set", "bogus=1"], ["bogus", "rows"]),
    ("machine-field-on-host", ["run", "loop-order", "--platform", "host", "--set", "caches.l1d.size=16kB"],
     ["caches.l1d.size", "--platform model"]),
    ("unknown-machine", ["run", "loop-order", "--machine", "nosuch"], ["nosuch", "x86-2012-server"]),
    ("machine-wrong-arch", ["run", "loop-order", "--machine", "ultrasparc-t1"], ["ultrasparc-t1", "x86_64"]),
    ("machine-wrong-arch-split", ["run", "x86-split-lock", "--machine", "ultrasparc-t1"], ["sparc64", "x86_64"]),
    ("machine-on-host", ["run", "loop-order", "--platform", "host", "--machine", "x86-2012-server"],
     ["--machine", "model"]),
    ("line-not-pow2", ["run", "loop-order", *M, "--set", "caches.l1d.line=48B"], ["caches.l1d.line", "power of two"]),
    ("unknown-cache-field", ["run", "loop-order", *M, "--set", "caches.l1d.bogus=1"], ["bogus", "size"]),
    ("entries-1e30", ["run", "loop-order", *M, "--set", "tlb.dtlb.entries=1e30"], ["tlb.dtlb.entries"]),
    ("cpi-bool", ["run", "loop-order", *M, "--set", "cpi=true"], ["cpi", "number"]),
    ("cpi-huge", ["run", "loop-order", *M, "--set", "cpi=1e30"], ["cpi"]),
    ("mem-latency-huge", ["run", "loop-order", *M, "--set", "memory.latency=1e30ns"], ["memory.latency"]),
    ("entries-2-64", ["run", "loop-order", *M, "--set", "tlb.dtlb.entries=18446744073709551616"],
     ["tlb.dtlb.entries"]),
    ("l2-size-huge", ["run", "loop-order", *M, "--set", "caches.l2.size=1099511627776GB"], ["caches.l2.size"]),
    ("reproduce-all-platform", ["reproduce-all", "--platform", "nope"], ["nope", "host"]),
    ("report-unknown-run", ["report", "no-such-run"], ["no-such-run"]),
    ("build-arch", ["build", "--arch", "mips"], ["mips", "sparc64"]),
    ("images-arch", ["images", "--arch", "mips"], ["mips", "armv6"]),
    ("simulate-no-machine", ["simulate", "--arch", "x86_64", "--", "/bin/true"], ["--machine"]),
    ("simulate-arch", ["simulate", "--machine", "x86-2012-server", "--arch", "mips", "--", "/bin/true"],
     ["mips", "x86_64"]),
    ("simulate-no-program", ["simulate", "--machine", "x86-2012-server", "--arch", "x86_64"], ["program"]),
    ("simulate-missing-program", ["simulate", "--machine", "x86-2012-server", "--arch", "x86_64", "--",
                                  "/nonexistent/prog"], ["/nonexistent/prog"]),
    ("simulate-text-program", ["simulate", "--machine", "x86-2012-server", "--arch", "x86_64", "--",
                               "/etc/hostname"], ["/etc/hostname"]),
    ("simulate-directory", ["simulate", "--machine", "x86-2012-server", "--arch", "x86_64", "--", "/tmp"],
     ["/tmp"]),
    ("simulate-machine-arch", ["simulate", "--machine", "ultrasparc-t1", "--arch", "x86_64", "--", "/bin/true"],
     ["sparc64", "x86_64"]),
    ("sensitivity-unknown", ["sensitivity", "no-such"], ["no-such"]),
    ("sensitivity-inf", ["sensitivity", "loop-order", "--factors", "inf"], ["--factors", "inf"]),
    ("sensitivity-zero", ["sensitivity", "loop-order", "--factors", "0"], ["--factors"]),
    ("sensitivity-text", ["sensitivity", "loop-order", "--factors", "abc"], ["--factors", "abc"]),
    ("sensitivity-param", ["sensitivity", "loop-order", "--param", "bogus.path"], ["bogus"]),
    ("gem5-machine", ["gem5", "--machine", "nosuch"], ["nosuch"]),
    ("gem5-set", ["gem5", "--machine", "x86-2012-server", "--set", "bogus=1"], ["bogus"]),
    ("unknown-command", ["frobnicate"], ["frobnicate"]),
    ("timeout-negative", ["run", "loop-order", "--timeout", "-5"], ["--timeout"]),
]

# kernel arguments, checked against each kernel's declared type and range before any run
KERNEL_ARGS = [
    ("rows-negative", ["run", "loop-order", "--platform", "host", "--set", "rows=-5"], ["rows"]),
    ("rows-text", ["run", "loop-order", "--platform", "host", "--set", "rows=abc"], ["rows"]),
    ("rows-huge", ["run", "loop-order", "--platform", "host", "--set", "rows=1e30"], ["rows"]),
    ("rows-empty", ["run", "loop-order", "--platform", "host", "--set", "rows="], ["rows"]),
    ("rows-zero", ["run", "loop-order", "--platform", "host", "--set", "rows=0"], ["rows"]),
    ("offsets-reversed", ["run", "x86-split-lock", "--platform", "host", "--set", "offsets=63-0"], ["offsets"]),
    ("target-negative", ["run", "x86-split-lock", "--platform", "host", "--set", "target_us=-1"], ["target_us"]),
    ("reps-zero", ["run", "x86-split-lock", "--platform", "host", "--set", "reps=0"], ["reps"]),
    ("variant-unknown", ["run", "x86-split-lock", "--platform", "host", "--set", "variant=nope"],
     ["variant", "locked"]),
]

_GOOD_MACHINE = (ROOT / "gem5_configs" / "machines" / "x86-2012-server.yaml").read_text()


def _machine_files(d: Path) -> list:
    """(case id, file, words) for machine files a user might pass with --machine."""
    d.mkdir(parents=True, exist_ok=True)
    files = {
        "binary": b"\x00\xff\xfe machine",
        "deep": ("a: " + "[" * 5000 + "]" * 5000 + "\n").encode(),
        "dupkey": (_GOOD_MACHINE + "\nclock: 9GHz\n").encode(),
        "empty": b"",
        "list": b"- 1\n- 2\n",
        "badunit": _GOOD_MACHINE.replace("line: 64B", "line: 64 bytes", 1).encode(),
    }
    out = []
    for name, data in files.items():
        p = d / f"x86-2012-server-{name}.yaml"
        p.write_bytes(data)
        out.append((name, str(p)))
    (d / "arch").mkdir(exist_ok=True)
    arch = d / "arch" / "x86-2012-server.yaml"
    arch.write_text(_GOOD_MACHINE.replace("arch: x86_64", "arch: sparc64", 1))
    out.append(("arch-sparc64", str(arch)))
    out.append(("directory", str(d)))
    out.append(("missing", str(d / "missing.yaml")))
    return out


MACHINE_WORDS = {"binary": ["not a text file"], "deep": ["nested"], "dupkey": ["clock", "twice"],
                 "empty": ["mapping"], "list": ["mapping"], "badunit": ["64 bytes", "valid units"],
                 "arch-sparc64": ["sparc64", "x86_64"], "directory": ["directory"], "missing": ["does not exist"]}


def _check(r, words, results: Path):
    err = r.stderr.strip()
    assert r.returncode != 0, f"accepted: {r.stdout}{r.stderr}"
    assert r.returncode == 2, f"exit {r.returncode}, not 2 (a usage error): {err}"
    assert "Traceback" not in r.stderr, r.stderr
    lines = err.splitlines()
    assert len(lines) == 1, f"not one line: {err}"
    for w in words:
        assert w.lower() in lines[0].lower(), f"'{w}' not named in: {lines[0]}"
    written = [p for p in results.rglob("*")] if results.exists() else []
    assert not written, f"wrote {written}"


@pytest.mark.parametrize("case,argv,words", CLI + KERNEL_ARGS, ids=[c[0] for c in CLI + KERNEL_ARGS])
def test_bad_cli_input_is_rejected_before_any_work(case, argv, words, results_dir):
    _check(trapline(*argv, timeout=300), words, results_dir)


@pytest.mark.parametrize("name", list(MACHINE_WORDS))
def test_bad_machine_file_is_rejected_before_any_work(name, tmp_path, results_dir):
    files = dict(_machine_files(tmp_path / "machines"))
    r = trapline("run", "x86-split-lock", "--machine", files[name], "--quick", timeout=300)
    _check(r, MACHINE_WORDS[name], results_dir)


def _experiment_tree(tmp_path: Path, edit) -> Path:
    """A copy of kernels/ where edit(text) changes loop-order's experiment.yaml."""
    tree = tmp_path / "kernels"
    shutil.copytree(ROOT / "kernels", tree, ignore=shutil.ignore_patterns("build"))
    f = tree / "loop-order" / "experiment.yaml"
    f.write_text(edit(f.read_text()))
    return tree


EXPERIMENT_EDITS = [
    ("misspelled-counter", lambda t: t.replace("model_l1d_misses", "model_l1d_mises", 1), ["model_l1d_mises"]),
    ("unknown-kernel-key", lambda t: t.replace("args: {", "args: {bogus_key: 1, ", 1)
     if "args: {" in t else t.replace("args:\n", "args:\n          bogus_key: 1\n", 1), ["bogus_key"]),
    ("not-yaml", lambda t: t + "\n  : : [\n", ["experiment.yaml"]),
    ("duplicate-key", lambda t: t + "\ndescription: again\n", ["description", "twice"]),
]


@pytest.mark.parametrize("case,edit,words", EXPERIMENT_EDITS, ids=[c[0] for c in EXPERIMENT_EDITS])
def test_broken_experiment_file_is_named_and_blocks_only_itself(case, edit, words, tmp_path, results_dir):
    tree = _experiment_tree(tmp_path, edit)
    env = {"TRAPLINE_KERNELS": str(tree)}
    r = trapline("list", env=env)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert "loop-order" in r.stderr and all(w in r.stderr for w in words), r.stderr
    assert "strlen-loop" in r.stdout, "one broken file hid the others"
    _check(trapline("run", "loop-order", "--quick", env=env), words, results_dir)


def test_results_path_problems_are_one_line(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    cases = [(str(f), "TRAPLINE_RESULTS"), ("", "TRAPLINE_RESULTS")]
    if os.geteuid() != 0:  # root writes through a read-only mode
        cases.append((str(ro), "TRAPLINE_RESULTS"))
    for value, word in cases:
        r = trapline("run", "loop-order", "--platform", "host", "--quick", env={"TRAPLINE_RESULTS": value})
        assert r.returncode == 2 and "Traceback" not in r.stderr, (value, r.stderr)
        assert word in r.stderr and len(r.stderr.strip().splitlines()) == 1, (value, r.stderr)


def test_latest_as_a_directory_and_a_damaged_run(tmp_path):
    root = tmp_path / "results"
    (root / "latest").mkdir(parents=True)
    r = trapline("report", env={"TRAPLINE_RESULTS": str(root)})
    assert r.returncode == 2 and "Traceback" not in r.stderr and "latest" in r.stderr, r.stderr
    run = root / "20260101-000000-run-loop-order-quick"
    run.mkdir()
    (run / "summary.json").write_text('{"run_id": "x", "experi')
    r = trapline("report", run.name, env={"TRAPLINE_RESULTS": str(root)})
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "summary.json" in r.stderr, r.stderr


def test_exit_status_and_timeout_flag(results_dir):
    """--timeout limits each command; a run with a failed entry exits 1 (not 0, not
    the usage error's 2), and the failure names the limit."""
    r = trapline("run", "x86-split-lock", "--platform", "host", "--quick", "--set", "target_us=2000000",
                 "--timeout", "0.5")
    assert r.returncode == 1, r.stderr
    latest = results_dir / "latest"
    import json
    summary = json.loads((latest / "summary.json").read_text())
    assert summary["counts"]["failed"] == 1
    entry = json.loads((latest / "entries" / "x86-split-lock.host.json").read_text())
    assert "timed out after 0.5 s" in entry["note"] + json.dumps(entry), entry
    r = trapline("run", "loop-order", "--platform", "host", "--quick")
    assert r.returncode == 0, r.stderr
