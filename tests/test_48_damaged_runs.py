"""Damaged and foreign files: a run folder whose files were damaged, an experiment folder
copied as a template, a run that fails or is refused, a write that fails.

Every command that reads a run folder (report, fidelity, cite, bundle, verify, and a
run that resumes) checks the files it reads against their schemas first
(trapline/runfiles.py, schema/run-*.schema.json): one line naming the file, the field
and what was expected, exit 2, no traceback, and nothing on disk changed. The run
folders are copies of one real `run loop-order --platform host --quick`, damaged one
way each."""

import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, rebundle, trapline

ENTRY = "entries/loop-order.host.json"


@pytest.fixture(scope="module")
def host_run(tmp_path_factory):
    """One real host run of loop-order (quick), and its bundle."""
    root = tmp_path_factory.mktemp("damage") / "results"
    env = {"TRAPLINE_RESULTS": str(root)}
    r = trapline("run", "loop-order", "--platform", "host", "--quick", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    path = (root / "latest").resolve()
    b = trapline("bundle", path.name, env=env)
    assert b.returncode == 0, b.stderr
    return {"path": path, "bundle": Path(b.stdout.strip())}


def snapshot(top: Path) -> dict:
    """Every path under top: its kind, and for a file its bytes' sha256 and mtime (a FIFO
    is never opened)."""
    out = {}
    for p in sorted(Path(top).rglob("*")):
        st = p.lstat()
        rel = str(p.relative_to(top))
        if stat.S_ISREG(st.st_mode):
            out[rel] = ("file", hashlib.sha256(p.read_bytes()).hexdigest(), st.st_mtime_ns)
        elif stat.S_ISLNK(st.st_mode):
            out[rel] = ("link", os.readlink(p))
        else:
            out[rel] = (stat.S_IFMT(st.st_mode),)
    return out


def one_line_error(r, *needles: str) -> str:
    """r is one `trapline: error:` line holding every needle, exit 2, no traceback."""
    err = r.stderr.strip()
    assert r.returncode == 2, (r.returncode, r.stdout[-2000:], err[-3000:])
    assert "Traceback" not in r.stderr and len(err.splitlines()) == 1, err
    assert err.startswith("trapline: error: "), err
    for n in needles:
        assert n in err, (n, err)
    return err


def _edit(name, fn):
    def damage(d: Path):
        p = d / name
        p.write_text(json.dumps(fn(json.loads(p.read_text()))))
    return damage


def _drop(key):
    def fn(x):
        del x[key]
        return x
    return fn


def _set(key, value):
    def fn(x):
        x[key] = value
        return x
    return fn


def _replace_with_dir(d: Path):
    (d / ENTRY).unlink()
    (d / ENTRY).mkdir()


def _replace_with_fifo(d: Path):
    (d / ENTRY).unlink()
    os.mkfifo(d / ENTRY)


def _summary_without_id(x):
    del x["experiments"][0]["id"]
    return x


def _group_field(key, value):
    def fn(x):
        x["groups"][0][key] = value
        return x
    return fn


# (kind, damage(run folder), the file it names, what the line says of the field and what was expected)
DAMAGE = [
    ("entry-lacks-fields", _edit(ENTRY, _drop("status")), ENTRY,
     "status: missing (expected one of reproduced, differs, not-applicable, failed)"),
    ("entry-is-a-list", _edit(ENTRY, lambda x: [x]), ENTRY, "(top level): is an array"),
    ("summary-experiment-without-id", _edit("summary.json", _summary_without_id), "summary.json",
     "experiments[0].id: missing (expected a string)"),
    ("dict-for-a-number", _edit(ENTRY, _set("reproduced", {"value": 5})), ENTRY,
     "reproduced: is an object ({\"value\": 5}), expected a number or null"),
    ("dict-for-a-group-median", _edit(ENTRY, _group_field("median_ns_per_op", {})), ENTRY,
     "groups[0].median_ns_per_op: is an object ({}), expected a number"),
    ("dict-for-a-count", _edit("summary.json", lambda x: {**x, "counts": {**x["counts"], "reproduced": {}}}),
     "summary.json", "counts.reproduced: is an object ({}), expected a whole number"),
    ("unknown-status", _edit(ENTRY, _set("status", "great")), ENTRY,
     "status: \"great\" is not valid, expected one of reproduced, differs"),
    ("plot-stat-unknown", _edit(ENTRY, _set("plot", {"stat": "joules"})), ENTRY,
     "plot.stat: \"joules\" is not valid, expected one of ns_per_op"),
    ("truncated", lambda d: (d / ENTRY).write_bytes((d / ENTRY).read_bytes()[:300]), ENTRY,
     "is not valid JSON (it ends early: truncated)"),
    ("empty", lambda d: (d / ENTRY).write_bytes(b""), ENTRY, "is empty, expected JSON"),
    ("binary", lambda d: (d / ENTRY).write_bytes(bytes(range(256)) * 8), ENTRY,
     "is not a text file (byte 128 is not UTF-8), expected JSON"),
    ("nested-too-deep", lambda d: (d / ENTRY).write_text("[" * 100000 + "]" * 100000), ENTRY,
     "is JSON nested too deep to read"),
    ("missing-entry", lambda d: (d / ENTRY).unlink(), ENTRY, "is missing entries/loop-order.host.json"),
    ("directory-for-a-file", _replace_with_dir, ENTRY, "is a directory, expected a JSON file"),
    ("fifo-for-a-file", _replace_with_fifo, ENTRY, "is not a regular file, expected a JSON file"),
    ("foreign-entry", _edit(ENTRY, _set("id", "x86-split-lock")), ENTRY,
     "id: is \"x86-split-lock\", expected \"loop-order\" (the entry's file name)"),
    ("path-in-an-id", _edit("summary.json", lambda x: {**x, "experiments": [
        {**x["experiments"][0], "id": "../../../etc/passwd"}]}), "summary.json",
     "experiments[0].id: \"../../../etc/passwd\" is not valid, expected an experiment id"),
    ("manifest-is-a-list", _edit("manifest.json", lambda x: [x]), "manifest.json", "(top level): is an array"),
    ("manifest-field-wrong-type", _edit("manifest.json", _set("git", {"commit": 7})), "manifest.json",
     "git.commit: is a whole number (7), expected a string"),
    ("missing-summary", lambda d: (d / "summary.json").unlink(), "summary.json", "missing; the run is damaged"),
    # what a report cannot show: text that is no Unicode (an escaped lone surrogate), a number that is not finite
    ("lone-surrogate", _edit(ENTRY, _set("note", "\udc80 ends a note")), ENTRY,
     "note: holds '\\udc80' at character 0, a lone surrogate that is not text"),
    ("nan", _edit(ENTRY, _set("reproduced", float("nan"))), ENTRY,
     "reproduced: is nan (NaN or a number beyond what a float holds), expected a finite number"),
    ("beyond-a-float", lambda d: (d / ENTRY).write_text(re.sub(r'"reproduced": [^,]+', '"reproduced": 1e400',
                                                               (d / ENTRY).read_text(), count=1)), ENTRY,
     "reproduced: is inf (NaN or a number beyond what a float holds)"),
]
# every kind is read by `report` and by one of the others in turn (they share one reader,
# trapline/runfiles.py; each command meets several kinds)
OTHERS = ["fidelity", "cite", "bundle"]


@pytest.mark.parametrize("i, kind, damage, name, says", [(i, *d) for i, d in enumerate(DAMAGE)],
                         ids=[d[0] for d in DAMAGE])
def test_a_damaged_run_is_one_line_exit_2_and_nothing_changes(host_run, tmp_path, i, kind, damage, name, says):
    """Each kind of damage, read by the commands that read a finished run: one line naming
    the file and what was wrong and expected, exit 2, and the results folder (the run and
    what is beside it) exactly as it was."""
    root = tmp_path / "results"
    run = root / host_run["path"].name
    shutil.copytree(host_run["path"], run)
    damage(run)
    before = snapshot(root)
    for cmd in ("report", OTHERS[i % len(OTHERS)]):
        r = trapline(cmd, run.name, env={"TRAPLINE_RESULTS": str(root)}, timeout=120)
        where = name if name == ENTRY and kind == "missing-entry" else f"{run}/{name}"
        one_line_error(r, where, says)
        assert snapshot(root) == before, (kind, cmd)


def read_only(dirs: list[Path], *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`trapline ARGS` with each of `dirs` bind-mounted read-only for it alone (a private mount
    namespace: `unshare --mount` as root, else with `--user --map-root-user` too), as on a
    read-only file system, which root cannot write through either; skipped, saying why,
    where no namespace can be made."""
    mounts = " && ".join(f"mount --bind {d} {d} && mount -o remount,bind,ro {d}" for d in dirs)
    script = f"{mounts} && exec {sys.executable} -m trapline " + " ".join(f"'{a}'" for a in args)
    why = []
    for pre in ([["unshare", "--mount"]] if os.geteuid() == 0 else []) + [["unshare", "--user", "--map-root-user",
                                                                             "--mount"]]:
        r = subprocess.run(pre + ["sh", "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                           env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
        if "unshare:" not in r.stderr and "mount:" not in r.stderr:
            return r
        why.append(r.stderr.strip())
    pytest.skip("no read-only mount could be made: " + "; ".join(why))


def test_report_on_a_read_only_run_folder_is_one_line_and_changes_nothing(host_run, tmp_path):
    root = tmp_path / "results"
    run = root / host_run["path"].name
    shutil.copytree(host_run["path"], run)
    before = snapshot(root)
    r = read_only([run], "report", run.name, env={"TRAPLINE_RESULTS": str(root)})
    one_line_error(r, f"report: the run folder {run} cannot be written (Read-only file system)", "nothing changed")
    assert snapshot(root) == before


def test_the_commands_that_only_read_work_on_a_read_only_results_directory(host_run, tmp_path):
    """fidelity and cite read a run: a results directory on a read-only file system is no
    reason to refuse them."""
    root = tmp_path / "results"
    shutil.copytree(host_run["path"], root / host_run["path"].name)
    before = snapshot(root)
    for cmd in ("fidelity", "cite"):
        r = read_only([root], cmd, host_run["path"].name, env={"TRAPLINE_RESULTS": str(root)})
        assert r.returncode == 0 and "Traceback" not in r.stderr, (cmd, r.stderr[-2000:])
        assert r.stdout.strip(), cmd
    assert snapshot(root) == before


def _rebundle(src: Path, dst: Path, name: str, damage) -> Path:
    """The bundle with one member damaged and SHA256SUMS made to match (the bundled run was
    damaged before it was bundled: only the schema check can tell)."""
    def edit(files, top):
        files[f"{top}/{name}"] = damage(files[f"{top}/{name}"])
    return rebundle(src, dst, edit, resum=True)


def _json_edit(fn):
    return lambda b: json.dumps(fn(json.loads(b))).encode()


@pytest.mark.parametrize("name, damage, says", [
    (ENTRY, _json_edit(lambda x: [x]), "(top level): is an array"),
    (ENTRY, _json_edit(_drop("metric")), "metric: missing (expected a string)"),
    (ENTRY, _json_edit(_set("claimed", {"x": 1})), "claimed: is an object"),
    (ENTRY, lambda b: b[:200], "is not valid JSON (it ends early: truncated)"),
    (ENTRY, lambda b: b"\xff\xfe" + b, "is not a text file"),
    ("manifest.json", _json_edit(_set("args", ["run"])), "args: is an array"),
], ids=["entry-list", "entry-lacks-field", "dict-for-a-number", "truncated", "binary", "manifest-args"])
def test_verify_of_a_bundled_damaged_run_is_one_line_exit_2(host_run, tmp_path, name, damage, says):
    """A bundle whose hashes match but whose run was damaged: verify names the bundle, the
    file and the field, exit 2, before rerunning anything (no new run in the results)."""
    bad = _rebundle(host_run["bundle"], tmp_path / "damaged.tar.gz", name, damage)
    root = tmp_path / "results"
    root.mkdir()
    before = snapshot(tmp_path)
    r = trapline("verify", str(bad), env={"TRAPLINE_RESULTS": str(root)}, timeout=120)
    one_line_error(r, f"damaged.tar.gz: {name}: {says}", "the bundled run is damaged")
    assert "files match SHA256SUMS" in r.stdout and "rerunning" not in r.stdout
    assert snapshot(tmp_path) == before


# ------------------------------------------------------------------ a run that resumes

def _interrupted(host_run, root: Path) -> Path:
    """The host run as it stood before its report: .incomplete/<id>/ with its state (the
    arguments the same command gives: a rerun resumes it) and its entry, and no lock."""
    src = host_run["path"]
    manifest = json.loads((src / "manifest.json").read_text())
    inc = root / ".incomplete" / src.name
    (inc / "entries").mkdir(parents=True)
    (inc / "raw").mkdir()
    shutil.copy(src / ENTRY, inc / ENTRY)
    shutil.copy(src / "raw" / "loop-order.host.log", inc / "raw" / "loop-order.host.log")
    (inc / "state.json").write_text(json.dumps({"run_id": src.name, "args": manifest["args"],
                                                "started": manifest["started"]}))
    return inc


@pytest.mark.parametrize("kind, damage, says", [
    ("entry-is-a-list", _edit(ENTRY, lambda x: [x]), f"{ENTRY}: (top level): is an array"),
    ("entry-lacks-fields", _edit(ENTRY, _drop("note")), f"{ENTRY}: note: missing (expected a string)"),
    ("truncated", lambda d: (d / ENTRY).write_bytes((d / ENTRY).read_bytes()[:100]), "it ends early: truncated"),
    ("directory-for-a-file", _replace_with_dir, f"{ENTRY}: is a directory"),
    ("foreign-entry", _edit(ENTRY, _set("platform", "model")), f"{ENTRY}: platform: is \"model\", expected \"host\""),
], ids=["entry-is-a-list", "entry-lacks-fields", "truncated", "directory-for-a-file", "foreign-entry"])
def test_a_run_resuming_a_damaged_entry_refuses_and_changes_nothing(host_run, tmp_path, kind, damage, says):
    """`run` with the arguments of an interrupted run resumes it: a damaged entry of it is one
    line naming the entry, saying how to go on (--fresh), exit 2 before anything runs; the
    run is left as it was (no lock made, no new run)."""
    root = tmp_path / "results"
    inc = _interrupted(host_run, root)
    damage(inc)
    before = snapshot(root)
    r = trapline("run", "loop-order", "--platform", "host", "--quick", env={"TRAPLINE_RESULTS": str(root)})
    one_line_error(r, says, "--fresh", str(inc))
    assert "[1/1]" not in r.stderr
    assert snapshot(root) == before


@pytest.mark.parametrize("command", [["run", "loop-order", "--platform", "host", "--quick"],
                                     ["reproduce-all", "--platform", "host", "--quick"]])
@pytest.mark.parametrize("state, says", [
    ("[]", "state.json: (top level): is an array ([]), expected an object"),
    ('{"run_id": "x", "args": 5, "started": "now"}', "state.json: args: is a whole number (5), expected an object"),
    ('{"run_id": "x", "ar', "state.json: is not valid JSON (it ends early: truncated)"),
], ids=["list", "dict-for-args", "truncated"])
def test_a_damaged_state_of_an_interrupted_run_is_named_before_anything_runs(tmp_path, command, state, says):
    """The interrupted runs' states are what `run` and `reproduce-all` read to find the run
    to resume: a damaged one is named (move it away, or --fresh), exit 2, nothing changed."""
    root = tmp_path / "results"
    other = root / ".incomplete" / "20260101-000000-run-x"
    other.mkdir(parents=True)
    (other / "state.json").write_text(state)
    before = snapshot(root)
    r = trapline(*command, env={"TRAPLINE_RESULTS": str(root)})
    one_line_error(r, f"{other}/{says}", f"move {other} away", "--fresh")
    assert snapshot(root) == before


def test_an_interrupted_run_leaves_no_lock_and_resumes(host_run, tmp_path):
    """SIGTERM while the run runs: exit 130, the run stays in .incomplete/ with its state and
    no lock file; the same command resumes it and finishes."""
    root = tmp_path / "results"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRAPLINE_RESULTS=str(root))
    # 8192 x 8192 ints: the lane takes seconds (its quick default, under one)
    size = ["--set", "rows=8192", "--set", "cols=8192"]
    argv = [sys.executable, "-m", "trapline", "run", "loop-order", "--platform", "host", "--quick", *size]
    p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(root.glob(".incomplete/*/state.json")) and p.poll() is None:
        time.sleep(0.01)
    time.sleep(0.5)  # (into its entry: the lane takes seconds)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err[-3000:]
    [run] = list((root / ".incomplete").iterdir())
    assert (run / "state.json").is_file() and not (run / "lock").exists(), sorted(os.listdir(run))
    assert "rerun the same command to resume run" in err
    r = trapline("run", "loop-order", "--platform", "host", "--quick", *size, env={"TRAPLINE_RESULTS": str(root)})
    assert r.returncode == 0 and f"resuming run {run.name}" in r.stderr, r.stderr[-3000:]
    assert not list((root / ".incomplete").iterdir()) and not list(root.glob(f"{run.name}/lock"))


def test_a_run_that_breaks_before_its_first_entry_leaves_nothing(tmp_path, monkeypatch):
    """A run that fails before it has an entry (here its kernels cannot be built: the cache
    is a file) has nothing to resume: its folder, state and lock go."""
    from trapline import runner
    cache = tmp_path / "cache-is-a-file"
    cache.write_text("not a directory\n")
    monkeypatch.setenv("TRAPLINE_CACHE", str(cache))
    root = tmp_path / "results"
    with pytest.raises(OSError):
        runner.execute("run", ["loop-order"], "host", True, {}, root=root, log=lambda *a: None)
    assert list((root / ".incomplete").iterdir()) == []
    assert sorted(os.listdir(root)) == [".incomplete"]


# ------------------------------------------------------------------ an experiment folder copied as a template

def test_a_folder_copied_as_a_template_is_refused_with_the_fix(tmp_path):
    """kernels/my-copy/ copied from loop-order, its kernel.mk still building loop-order/...:
    `list` names it (the others still listed) and `run` refuses it, both with the fix, exit
    2, and the run leaves nothing in the results (no lock, no state)."""
    tree = tmp_path / "kernels"
    shutil.copytree(ROOT / "kernels", tree, ignore=shutil.ignore_patterns("build"))
    shutil.copytree(tree / "loop-order", tree / "my-copy")
    root = tmp_path / "results"
    env = {"TRAPLINE_KERNELS": str(tree), "TRAPLINE_RESULTS": str(root)}
    fix = ("kernels/my-copy/kernel.mk builds nothing under kernels/my-copy/: it names loop-order, as a folder "
           "copied from another experiment does; write my-copy for loop-order in kernel.mk")
    r = trapline("list", env=env)
    one_line_error(r, "my-copy/experiment.yaml", fix)
    assert "loop-order" in r.stdout and "my-copy" not in r.stdout
    r = trapline("run", "my-copy", "--platform", "host", "--quick", env=env)
    one_line_error(r, "my-copy/experiment.yaml", fix)
    assert not root.exists() or not [p for p in root.rglob("*") if p.name != ".incomplete"]
    # the fix it names works: the folder is an experiment of its own
    mk = tree / "my-copy" / "kernel.mk"
    mk.write_text(mk.read_text().replace("loop-order", "my-copy"))
    r = trapline("list", env=env)
    assert "kernel.mk builds nothing" not in r.stderr, r.stderr
    assert "my-copy/experiment.yaml: platforms.host.runs[0].binary: 'loop-order' is not built" in r.stderr


# ------------------------------------------------------------------ atomic writes

def test_a_machine_written_onto_a_directory_leaves_no_temporary_file(tmp_path):
    """`gem5 --machine M -o DIR`: one line, exit 2, and nothing beside DIR (there was a DIR.tmp)."""
    (tmp_path / "DIR").mkdir()
    r = trapline("gem5", "--machine", "x86-2012-server", "-o", str(tmp_path / "DIR"))
    one_line_error(r, f"-o {tmp_path / 'DIR'}: is a directory; name the file to write")
    assert sorted(os.listdir(tmp_path)) == ["DIR"] and os.listdir(tmp_path / "DIR") == []
    r = trapline("gem5", "--machine", "x86-2012-server", "-o", str(tmp_path / "m.json"))
    assert r.returncode == 0 and json.loads((tmp_path / "m.json").read_text()), r.stderr
    assert sorted(os.listdir(tmp_path)) == ["DIR", "m.json"]


def test_every_atomic_write_that_fails_removes_its_temporary_file(tmp_path):
    """The one atomic write (results.atomic_write) and the caches' best-effort one
    (results.cache_write, the memos and trapline.checked): onto a directory, a write fails
    and leaves only what was there."""
    from trapline import results
    target = tmp_path / "target"
    (target / "inside").mkdir(parents=True)
    with pytest.raises(IsADirectoryError):
        results.atomic_write(target, "x")
    assert results.cache_write(target, "x") is False
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["target", "target/inside"]
    assert results.cache_write(tmp_path / "memo", "y") is True and (tmp_path / "memo").read_text() == "y"
    assert sorted(os.listdir(tmp_path)) == ["memo", "target"]
