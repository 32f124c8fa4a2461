"""Malformed input, as a hostile but fair user would type it (CLI subsystem, 3x).

Every case must: exit non-zero (2 for a usage error), print one line on stderr
that names the field or argument and what is valid, print no traceback, write
no run directory or .incomplete state, and leave no process running.
"""

import os
import shutil
import subprocess
import sys
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
    ("machine-other-arch", ["run", "loop-order", "--platform", "model", "--machine", "ultrasparc-iv-plus"],
     ["machine 'ultrasparc-iv-plus' is sparc64, but loop-order runs its model lane on x86_64"]),
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
    env = {"GEM5": "none"} if case == "planned-platform" else None  # no gem5 here, whatever is built
    _check(trapline(*argv, timeout=300, env=env), words, results_dir)


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


@pytest.mark.parametrize("case", ["proc", "proc-itself", "under-a-file", "latest-directory", "latest-file"])
def test_a_results_directory_that_cannot_hold_a_run_is_refused_before_it(case, tmp_path):
    """/proc, a path through a file, a `latest` that is a directory or a file: one line, exit 2,
    before the run (no entry, no .incomplete run, no stray temporary link), no traceback."""
    (tmp_path / "a-file").write_text("x")
    root = {"proc": Path("/proc/trapline-results"), "proc-itself": Path("/proc"),
            "under-a-file": tmp_path / "a-file" / "results"}.get(case, tmp_path / "results")
    if case.startswith("latest"):
        (root / "latest").mkdir(parents=True) if case == "latest-directory" else \
            (root.mkdir(), (root / "latest").write_text("mine"))
    before = sorted(p.name for p in root.iterdir()) if root.is_dir() and case.startswith("latest") else None
    r = trapline("run", "loop-order", "--platform", "host", "--quick", env={"TRAPLINE_RESULTS": str(root)})
    words = {"proc": ["/proc/trapline-results", "cannot hold runs"], "proc-itself": ["/proc", "cannot hold runs"],
             "under-a-file": ["a-file", "is a file"], "latest-directory": ["latest", "is a directory", "move it"],
             "latest-file": ["latest", "is a file", "move it"]}[case]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and all(w in r.stderr for w in words), r.stderr
    assert "loop-order on host" not in r.stderr  # before the run
    if before is not None:
        assert sorted(p.name for p in root.iterdir()) == before, list(root.iterdir())


@pytest.mark.parametrize("case", ["loop", "loop-above", "dangling"])
def test_results_directory_through_a_symlink_that_leads_nowhere(case, tmp_path):
    """TRAPLINE_RESULTS a symbolic link that loops (or one on the way to it, or one to nothing):
    one line saying so, exit 2, for a command that writes runs and for one that reads them."""
    link = tmp_path / "results"
    os.symlink(link if case != "dangling" else tmp_path / "gone", link)
    root = link / "deeper" if case == "loop-above" else link
    words = {"loop": [str(root), "symbolic link that loops"],
             "loop-above": [str(root), "cannot be reached", "symbolic links"],
             "dangling": [str(root), "symbolic link that leads to", "which does not exist"]}[case]
    for argv in (["run", "loop-order", "--platform", "host", "--quick"], ["fidelity"]):
        r = trapline(*argv, env={"TRAPLINE_RESULTS": str(root)})
        _check(r, ["TRAPLINE_RESULTS", *words], tmp_path / "gone")
        assert "is a file" not in r.stderr, r.stderr


def _no_build_env(tmp_path: Path) -> dict:
    """A cache of its own, and a PATH without gem5's build tools: a check that let a build
    through would stop at its missing tools, not run for 90 minutes (test_92's way)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    return {"TRAPLINE_CACHE": str(tmp_path / "cache"), "PATH": str(bindir), "GEM5": "none"}


@pytest.mark.parametrize("argv,words", [
    (["-j", "0"], ["-j", "positive whole number", "'0'"]),
    (["-j", "-3"], ["-j", "positive whole number", "'-3'"]),
    (["-j", "two"], ["-j", "positive whole number", "'two'"]),
    (["--source", ""], ["--source", "not an empty path", "tarball"]),
    (["--source", "DIR"], ["--source", "is a directory", "tarball"]),
], ids=["j-0", "j-negative", "j-word", "source-empty", "source-directory"])
def test_gem5_build_options_are_checked_before_anything_builds(argv, words, tmp_path):
    argv = [str(tmp_path) if a == "DIR" else a for a in argv]
    env = _no_build_env(tmp_path)
    r = subprocess.run([sys.executable, "-m", "trapline", "gem5", "build", *argv], capture_output=True, text=True,
                       env={**os.environ, **env, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=300)
    _check(r, words, tmp_path / "cache")


def test_gem5_which_of_something_that_is_not_gem5_is_one_line_and_remembers_nothing(tmp_path):
    fake = tmp_path / "gem5.opt"
    fake.write_text("#!/bin/sh\necho hello\n")
    fake.chmod(0o755)
    for prog in (str(fake), "/bin/true"):
        r = trapline("gem5", "which", "--gem5", prog, env={"TRAPLINE_CACHE": str(tmp_path / "cache"), "GEM5": ""})
        _check(r, ["is not gem5", "said nothing of gem5's"], tmp_path / "cache")


def _elf(tmp_path: Path, name: str, flags: list[str], source: str = "int main(void) { return 0; }\n") -> Path:
    (tmp_path / "p.c").write_text(source)
    out = tmp_path / name
    subprocess.run(["gcc", *flags, "-o", str(out), str(tmp_path / "p.c")], check=True)
    out.chmod(0o755)
    return out


@pytest.mark.parametrize("kind,words", [
    ("truncated", ["is truncated", "lies past its end"]),
    ("shared-object", ["is a shared object", "not an executable", "-static"]),
    ("object-file", ["is an object file", "not linked"]),
])
def test_simulate_refuses_what_is_no_whole_executable(kind, words, tmp_path, results_dir):
    """A copy cut short, a library or an object file: one line before anything runs (qemu's
    own error and a result of zeros, before); a static PIE still runs."""
    if kind == "truncated":
        whole = _elf(tmp_path, "whole", ["-static", "-O1"])
        prog = tmp_path / "cut"
        prog.write_bytes(whole.read_bytes()[:20000])
        prog.chmod(0o755)
    else:
        prog = _elf(tmp_path, "lib.so" if kind == "shared-object" else "p.o",
                    ["-shared", "-fPIC"] if kind == "shared-object" else ["-c"])
    r = trapline("simulate", "--machine", "x86-2012-server", "--platform", "host", "--", str(prog))
    _check(r, [str(prog), *words], results_dir)
    pie = _elf(tmp_path, "pie", ["-static-pie", "-O1"])
    r = trapline("simulate", "--machine", "x86-2012-server", "--platform", "host", "--format", "json", "--", str(pie))
    assert r.returncode == 0, r.stderr


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


# ------------------------------------------------------------ hostile files and absurd numbers

def _deep(n: int) -> dict[str, str]:
    """YAML nested n levels deep, four ways (each was a segfault past about 50,000 levels)."""
    return {"flow-lists": "a: " + "[" * n + "]" * n + "\n",
            "flow-maps": "a: " + "{b: " * n + "1" + "}" * n + "\n",
            "block-lists": "a:\n  " + "- " * n + "x\n",
            "block-maps": "".join(" " * i + f"k{i}:\n" for i in range(400)) + " " * 400 + "v: 1\n"}


def _alias_bomb(levels: int = 25, fan: int = 9) -> str:
    """A dozen lines whose aliases expand to fan**levels nodes (9**25: about 7e23)."""
    out = f"a0: &a0 [{', '.join(['x'] * fan)}]\n"
    for i in range(1, levels + 1):
        out += f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]\n"
    return out


HOSTILE = {**{f"deep-{k}": v for k, v in _deep(100_000).items()},
           "deep-1e6": "a: " + "[" * 1_000_000 + "]" * 1_000_000 + "\n",
           "alias-bomb": _alias_bomb(),
           "alias-deep": "a: &a " + "[" * 60 + "1" + "]" * 60 + "\nb: &b " + "[*a, " * 60 + "1" + "]" * 60 + "\n",
           "alias-in-itself": "a: &a [1, *a]\n"}
HOSTILE_WORDS = {"alias-bomb": ["aliases", "100,000"], "alias-in-itself": ["*a", "inside its own anchor"]}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_yaml_is_refused_from_its_events(name):
    """Any depth (100,000 and 1,000,000 levels), an alias bomb, an alias inside itself: one
    error from the event pre-scan, without building (or expanding) the document."""
    from trapline.errors import UsageError
    from trapline.yamlfile import load_text
    with pytest.raises(UsageError) as e:
        load_text(HOSTILE[name], "f.yaml", UsageError)
    for w in HOSTILE_WORDS.get(name, ["nested more than 100 levels"]):
        assert w in str(e.value), str(e.value)
    assert load_text("a: &a [1, 2]\nb: *a\nc: 1e30\n", "ok.yaml", UsageError) == \
        {"a": [1, 2], "b": [1, 2], "c": 1e30}  # aliases of sane size still load; 1e30 is a number


@pytest.mark.parametrize("name,argv", [
    ("deep-flow-lists", ["simulate", "--arch", "x86_64", "--machine", "{f}", "--", "/bin/true"]),
    ("deep-block-lists", ["run", "x86-split-lock", "--quick", "--machine", "{f}"]),
    ("alias-bomb", ["run", "x86-split-lock", "--quick", "--machine", "{f}"]),
    ("deep-flow-maps", ["simulate", "--arch", "x86_64", "--machine", "x86-2012-server", "--set",  # (an
                        "caches=" + "[" * 60_000 + "]" * 60_000, "--", "/bin/true"]),  # argument holds 128 kB)
], ids=["deep-flow-lists", "deep-block-lists", "alias-bomb", "deep-set"])
def test_hostile_machine_file_is_one_line_in_run_and_simulate(name, argv, tmp_path, results_dir):
    f = tmp_path / f"{name}.yaml"
    f.write_text(HOSTILE[name])
    r = trapline(*[a.replace("{f}", str(f)) for a in argv], timeout=60)
    _check(r, HOSTILE_WORDS.get(name, ["nested more than 100 levels"]), results_dir)


_SERVER = ["--machine", "x86-2012-server", "--arch", "x86_64"]
ABSURD = [  # (case, argv, words the line must hold, words it must not)
    ("clock-1e400", ["--set", "clock=1e400GHz"], ["clock", "too large"], ["split_lock"]),
    ("clock-1e300", ["--set", "clock=1e300GHz"], ["clock", "too large", "Hz"], ["split_lock", "nan"]),
    ("latency-1e400", ["--set", "memory.latency=1e400ns"], ["memory.latency", "too large"], ["split_lock"]),
    ("numa-1e400", ["--set", "numa.latency_ns[0][0]=1e400ns"], ["numa.latency_ns[0][0]", "too large"], []),
    ("size-1e400", ["--set", "caches.l1d.size=1e400kB"], ["caches.l1d.size", "too large"], []),
    ("cpi-1e30", ["--set", "cpi=1e30"], ["cpi", "out of range"], ["'1e30'"]),
    ("cpi-1e400", ["--set", "cpi=1e400"], ["cpi", "too large"], []),
    ("tlb-negative", ["--set", "tlb.dtlb.entries=-64"], ["tlb.dtlb.entries", "at least 1"], ["multiple"]),
    ("numa-nodes-negative", ["--set", "numa.nodes=-2"], ["numa.nodes", "at least 1"], ["-2 rows"]),
    ("size-negative", ["--set", "caches.l1d.size=-32kB"], ["caches.l1d.size", "negative"], []),
    ("digits-5000", ["--set", "tlb.dtlb.entries=" + "9" * 5000], ["tlb.dtlb.entries", "5,000 digits"], []),
]


@pytest.mark.parametrize("case,argv,words,never", ABSURD, ids=[c[0] for c in ABSURD])
def test_absurd_numbers_name_the_real_problem(case, argv, words, never, results_dir):
    r = trapline("simulate", *_SERVER, *argv, "--", "/bin/true", timeout=60)
    _check(r, words, results_dir)
    for w in never:
        assert w not in r.stderr, r.stderr


def test_absurd_numbers_in_files_and_kernel_arguments(tmp_path, results_dir):
    """The same numbers written in a machine file (1e400GHz, a 5,000-digit count, a 50 MB
    value: the line names it, shortened) and given to a kernel (a 5,000-digit rows)."""
    d = tmp_path / "m"
    d.mkdir()
    cases = {"inf": (_GOOD_MACHINE.replace("value: 2.6GHz", "value: 1e400GHz", 1), ["clock", "too large"]),
             "digits": (_GOOD_MACHINE.replace("entries: 64", "entries: " + "9" * 5000, 1), ["5,000 digits", "line"]),
             "huge": (_GOOD_MACHINE.replace("value: 2.6GHz", 'value: "' + "9" * 50_000_000 + 'GHz"', 1),
                      ["clock", "characters]", "too large"])}
    for name, (text, words) in cases.items():
        f = d / name / "x86-2012-server.yaml"
        f.parent.mkdir()
        f.write_text(text)
        r = trapline("simulate", "--machine", str(f), "--arch", "x86_64", "--", "/bin/true", timeout=120)
        _check(r, words, results_dir)
        assert len(r.stderr) < 2000, (name, len(r.stderr))
    r = trapline("run", "loop-order", "--platform", "host", "--set", "rows=" + "9" * 5000, timeout=60)
    _check(r, ["rows", "5,000 characters", "an integer from 1"], results_dir)


def _tree_of(tmp_path: Path, keep: list[str], broken: str, text: str) -> Path:
    """A kernels tree of `keep` experiments (with common/ and the Makefile) where
    `broken`'s experiment.yaml is `text`."""
    tree = tmp_path / "kernels"
    tree.mkdir()
    for p in (ROOT / "kernels").iterdir():
        if p.name in ("Makefile", "README.md"):
            shutil.copy(p, tree / p.name)
        elif p.is_dir() and p.name in keep + ["common", broken]:
            shutil.copytree(p, tree / p.name, ignore=shutil.ignore_patterns("build"))
    (tree / broken / "experiment.yaml").write_text(text)
    return tree


@pytest.mark.parametrize("why,text,words", [
    ("deep", "a: " + "[" * 100_000 + "]" * 100_000 + "\n", ["nested more than 100 levels"]),
    ("schema", "description: only this\n", ["catalogue"]),
], ids=["deep", "schema"])
def test_a_broken_neighbour_blocks_nothing_else(why, text, words, tmp_path):
    """loop-order's file is broken: strlen-loop still runs; reproduce-all gives loop-order
    a failed entry with the reason (exit 1), runs the rest and finishes its report."""
    tree = _tree_of(tmp_path, ["strlen-loop"], "loop-order", text)
    root = tmp_path / "results"
    env = {"TRAPLINE_KERNELS": str(tree), "TRAPLINE_RESULTS": str(root)}
    r = trapline("run", "strlen-loop", "--platform", "host", "--quick", env=env)
    assert r.returncode == 0, r.stderr
    r = trapline("reproduce-all", "--platform", "host", "--quick", env=env)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    import json
    run = (root / "latest").resolve()
    summary = json.loads((run / "summary.json").read_text())
    status = {(e["id"], e["platform"]): e["status"] for e in summary["experiments"]}
    assert status[("loop-order", "host")] == "failed" and status[("strlen-loop", "host")] == "reproduced", status
    entry = json.loads((run / "entries" / "loop-order.host.json").read_text())
    assert "experiment.yaml" in entry["note"] and all(w in entry["note"] for w in words), entry["note"]
    assert "loop-order" in (run / "report.md").read_text()
    manifest = json.loads((run / "manifest.json").read_text())
    assert all(w in manifest["experiments"]["loop-order"]["error"] for w in words)


def test_sensitivity_plans_past_a_broken_neighbour(tmp_path, monkeypatch):
    from trapline import sensitivity
    from trapline.errors import ExperimentError
    tree = _tree_of(tmp_path, ["loop-order"], "strlen-loop", "description: only this\n")
    monkeypatch.setenv("TRAPLINE_KERNELS", str(tree))
    exp, lane, m, cases = sensitivity.plan("loop-order", None, ["memory.latency"], [0.5, 2])
    assert exp.id == "loop-order" and [c[2] for c in cases] == ["45ns", "180ns"], cases
    with pytest.raises(ExperimentError, match="strlen-loop/experiment.yaml"):
        sensitivity.plan("strlen-loop", None, [], [2])
