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
        kids = {p for p in _descendants(proc.pid) if "qemu" in _cmdline(p)}
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


def test_a_child_before_exec_imports_and_loads_nothing():
    """die_with_parent runs in a forked child before exec, while another thread of
    the harness may be importing matplotlib (plots.preload) and so hold a module's
    or the dynamic loader's lock: it must set PR_SET_PDEATHSIG with what the parent
    resolved, importing nothing and opening no library (a run hung there once).
    Checked in a child interpreter in which both would raise."""
    code = textwrap.dedent("""
        import builtins, ctypes
        from trapline import proc
        def no(*a, **k):
            raise RuntimeError("imported or loaded in the child")
        builtins.__import__ = no
        ctypes.CDLL = no
        proc.die_with_parent()
        sig = ctypes.c_int(0)
        proc._PRCTL(2, ctypes.byref(sig), 0, 0, 0)  # PR_GET_PDEATHSIG
        print(sig.value)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == [str(int(signal.SIGKILL))]


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
