"""Concurrent and killed runs (results subsystem, 4x): two identical commands at
once, the first venv created by two ./run.sh at once, and no child left running
once the harness is SIGKILLed."""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import ROOT
from trapline import proc


def _cli(args, env):
    return subprocess.Popen([sys.executable, "-m", "trapline", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_two_identical_runs_at_once_both_finish_with_their_own_entries(tmp_path):
    root = tmp_path / "results"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRAPLINE_RESULTS=str(root))
    args = ["run", "loop-order", "--platform", "host", "--quick"]
    first = _cli(args, env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(root.glob(".incomplete/*/state.json")):
        time.sleep(0.05)
    second = _cli(args, env)  # the same command while the first is still running
    outs = [p.communicate(timeout=600) for p in (first, second)]
    for p, (out, err) in zip((first, second), outs):
        assert p.returncode == 0, err
    runs = sorted(p for p in root.iterdir() if not p.is_symlink() and (p / "summary.json").exists())
    assert len(runs) == 2, [p.name for p in root.iterdir()]
    for run in runs:
        summary = json.loads((run / "summary.json").read_text())
        for e in summary["experiments"]:
            entry = json.loads((run / "entries" / f"{e['id']}.{e['platform']}.json").read_text())
            assert entry["reproduced"] == e["reproduced"] and entry["status"] == e["status"], run
        assert not (run / "lock").exists() and not (run / "state.json").exists()
    assert not list(root.glob(".incomplete/*/state.json"))


def _descendants(pid: int) -> set[int]:
    """Every live process below pid, read from /proc."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = set(), [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:  # gone meanwhile
        return ""


def _runs_a_kernel(pid: int) -> bool:
    """A QEMU that runs a kernel or a guest (argv[0] qemu-*), not a `qemu-* --version` the
    harness asks for a manifest or a cache key (short-lived: finding only that one, the
    test would kill the harness before any QEMU it means to check had started)."""
    argv = _cmdline(pid).split("\0")
    return os.path.basename(argv[0]).startswith("qemu-") and "--version" not in argv


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("argv", [
    # qemu-user under the model; iters (the model lane's fixed pass count) makes each
    # qemu run last seconds, so the poll below cannot miss it (iters=20 ran ~0.2 s: flaky)
    ["run", "x86-split-lock", "--platform", "model", "--set", "iters=200000"],
    ["run", "sparc-misalign-trap", "--platform", "qemu", "--quick"],                # boot.sh and qemu-system
], ids=["model-user-mode", "qemu-guest"])
def test_no_child_outlives_a_sigkilled_harness(tmp_path, argv):
    """QEMU dies with the harness (PR_SET_PDEATHSIG, and setpriv in images/boot.sh)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRAPLINE_RESULTS=str(tmp_path / "results"))
    proc = _cli(argv, env)
    deadline = time.monotonic() + 300
    kids: set[int] = set()
    while time.monotonic() < deadline and proc.poll() is None:
        kids = {p for p in _descendants(proc.pid) if _runs_a_kernel(p)}
        if kids:
            break
        time.sleep(0.1)
    if not kids:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the harness never started qemu (exit {proc.returncode}):\n{out[-2000:]}\n{err[-2000:]}")
    proc.send_signal(signal.SIGKILL)  # the harness only: its children are in their own sessions
    proc.wait()
    time.sleep(1.0)
    assert not [k for k in kids if _alive(k)], "qemu outlived the SIGKILLed harness"


def test_a_child_runs_no_python_before_exec_and_dies_with_its_parent(tmp_path):
    """run_command's child is set to die by SIGKILL with its parent (setpriv
    --pdeathsig), and no Python code runs in it between fork and exec: another
    thread of the harness may be importing matplotlib (plots.preload) and so hold
    a module's, the loader's or malloc's lock at the fork (a run hung there once,
    when the child imported ctypes). Checked in a child interpreter: an at-fork
    hook, which CPython runs in the child only when Python code runs there
    (preexec_fn), must never fire, and the command sees PR_GET_PDEATHSIG = SIGKILL."""
    mark = tmp_path / "python-ran-in-the-child"
    code = textwrap.dedent(f"""
        import os, sys
        from trapline import proc
        os.register_at_fork(after_in_child=lambda: open({str(mark)!r}, "w").close())
        probe = ("import ctypes; s = ctypes.c_int(0); "
                 "ctypes.CDLL(None).prctl(2, ctypes.byref(s), 0, 0, 0); print(s.value)")  # PR_GET_PDEATHSIG
        status, out, err = proc.run_command([sys.executable, "-c", probe], 60)
        print(status, out.strip(), err.strip())
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["0", str(int(signal.SIGKILL))], r.stdout
    assert not mark.exists(), "Python code ran in the child between fork and exec"


def test_a_missing_program_is_an_error_before_anything_starts(tmp_path):
    """The program is found as exec would find it (on env's PATH, or a path from
    cwd) before setpriv starts: a missing one raises FileNotFoundError naming it,
    as Popen does, not a status of setpriv's."""
    with pytest.raises(FileNotFoundError, match="no-such-trapline-tool"):
        proc.run_command(["no-such-trapline-tool", "x"], 10, env={"PATH": "/usr/bin:/bin"})
    with pytest.raises(FileNotFoundError, match="no-such-binary"):
        proc.run_command(["./no-such-binary"], 10, cwd=tmp_path)
    (tmp_path / "here").write_text("#!/bin/sh\necho from \"$PWD\"\n")
    (tmp_path / "here").chmod(0o755)
    status, out, _ = proc.run_command(["./here"], 10, cwd=tmp_path)
    assert status == 0 and out.strip() == f"from {tmp_path}"


def test_first_venv_created_by_two_run_sh_at_once(tmp_path):
    """run.sh's venv creation under a race: the second waits for the first
    instead of deleting its half-made venv. A throwaway tree with run.sh, an
    empty requirements file (no download) and a one-line package."""
    tree = tmp_path / "tree"
    (tree / "trapline").mkdir(parents=True)
    shutil.copy(ROOT / "run.sh", tree / "run.sh")
    (tree / "requirements.txt").write_text("# nothing to install\n")
    (tree / "trapline" / "__init__.py").write_text("")
    (tree / "trapline" / "__main__.py").write_text("import sys; print('venv ok', sys.prefix)\n")
    env = dict(os.environ, TRAPLINE_CACHE=str(tmp_path / "cache"), TRAPLINE_SKIP_APT="1")
    env.pop("PYTHONPATH", None)
    procs = []
    for _ in range(2):
        procs.append(subprocess.Popen(["bash", str(tree / "run.sh")], cwd=tree, env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        time.sleep(0.3)
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "venv ok" in out, out + err
    errs = "".join(e for _, e in outs)
    assert errs.count("trapline: creating the Python environment") == 1, errs
    assert "waiting for it" in errs, errs  # the race happened: the second saw the first at work
    venvs = list((tmp_path / "cache").glob("venv-*/.ok"))
    assert len(venvs) == 1
