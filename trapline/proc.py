"""Running a child process with a timeout that kills its whole process group,
progress lines while it runs, and the tail of its output for error messages."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import threading
import time
from functools import lru_cache
from pathlib import Path

CONSOLE_TAIL_LINES = 20


@lru_cache(maxsize=None)
def tool_version(binary: str) -> str:
    """The first line of `binary --version` (QEMU's, for manifests and cache keys);
    "not installed" when it cannot be run, "unknown" when it prints nothing or hangs."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return "not installed"
    except subprocess.TimeoutExpired:
        return "unknown"
    return out.splitlines()[0] if out.strip() else "unknown"


# Every child is started through setpriv (util-linux, Essential in Debian) with its
# parent-death signal set to SIGKILL, so that a harness killed with SIGKILL leaves
# no guest or build running (a SIGKILL cannot be caught, and the children run in
# their own sessions); images/boot.sh starts QEMU the same way. No Python code runs
# in the child between fork and exec (no preexec_fn): another thread of the harness
# (the report's matplotlib preload, plots.preload) may hold a module's, the
# loader's or malloc's lock at the fork, and a child that ran Python code there
# could wait for it forever (seen: a run hung before QEMU started).
SETPRIV = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
DEATH_SIGNAL = "KILL"


def _resolve(program: str, cwd: Path | None, env: dict | None) -> str:
    """program as exec would find it (a path with a slash from cwd, else on env's
    PATH): FileNotFoundError, as Popen raises, when there is none."""
    if "/" in program:
        found = program if os.access(Path(cwd or ".") / program, os.X_OK) else None
    else:
        found = shutil.which(program, path=os.pathsep.join(os.get_exec_path(env)))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    return found


def with_parent_death(cmd: list[str], cwd: Path | None = None, env: dict | None = None) -> list[str]:
    """cmd, started by setpriv with the parent-death signal set (it execs cmd in
    the same process, so the child's pid and /proc/PID/cmdline are cmd's)."""
    if SETPRIV is None:
        raise RuntimeError("setpriv (util-linux) is not installed: trapline starts every child through it so that "
                           "none outlives a killed harness; install util-linux")
    return [SETPRIV, f"--pdeathsig={DEATH_SIGNAL}", "--", _resolve(cmd[0], cwd, env)] + list(cmd[1:])


# The parent-death signal reaches the child alone: its own children (a build script's
# tar, make and compilers) would outlive a harness killed with SIGKILL, and a kernel
# build's lock with them. A command wrapped here runs under a shell that watches the
# harness once a second and, when it is gone, kills the command's whole process group
# (run_command starts each child in a session of its own).
_GROUP_WATCH = ('p=$PPID; "$@" & c=$!; '
                '(while kill -0 "$p" 2>/dev/null; do sleep 1; done; kill -KILL 0) </dev/null >/dev/null 2>&1 & w=$!; '
                'wait "$c"; s=$?; kill "$w" 2>/dev/null; exit "$s"')


def group_dies_with_harness(cmd: list[str]) -> list[str]:
    """cmd, run so that all of its process group dies when the harness does (even by SIGKILL)."""
    return ["bash", "-c", _GROUP_WATCH, "trapline-watch", *cmd]


def run_command(cmd: list[str], timeout: float, cwd: Path | None = None, log=None,
                progress_every: float = 15.0, env: dict | None = None,
                on_line=None, marker: str | None = None,
                marker_timeout: float | None = None, stop=None) -> tuple[int | None, str, str]:
    """Run cmd in its own process group; on timeout kill the whole group.
    While it runs, log a progress line every progress_every seconds with the
    number of samples printed so far; on_line(line) sees each stdout line as it
    arrives. With marker and marker_timeout, a process whose stdout has no line
    starting with marker by then is killed too (a guest that never reaches its
    init). stop(): polled while it runs; True kills it as a timeout does (a caller
    that sees the next sample cannot end in time: kernelio.SampleWatch). Returns
    (exit status or None on timeout or stop, stdout, stderr)."""
    proc = subprocess.Popen(with_parent_death(cmd, cwd, env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, errors="replace", cwd=cwd, start_new_session=True, env=env)
    chunks: dict[str, list[str]] = {"out": [], "err": []}
    seen = {"marker": marker is None}

    def pump(stream, key):
        for line in stream:
            chunks[key].append(line)
            if key == "out" and not seen["marker"] and marker in line:
                seen["marker"] = True
            if on_line and key == "out":
                on_line(line)

    readers = [threading.Thread(target=pump, args=(proc.stdout, "out"), daemon=True),
               threading.Thread(target=pump, args=(proc.stderr, "err"), daemon=True)]
    for t in readers:
        t.start()
    t0 = time.monotonic()
    next_report = t0 + progress_every
    status: int | None = None
    exited = _ExitWaiter(proc)
    while True:
        try:
            status = exited(0.25)
            break
        except BaseException as e:  # noqa: B036 - Ctrl-C must not leave a guest or a build running
            if not isinstance(e, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                exited.close()
                raise
            now = time.monotonic()
            late = marker_timeout is not None and not seen["marker"] and now - t0 > marker_timeout
            if now - t0 > timeout or late or (stop is not None and stop()):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
                status = None
                break
            if log and now >= next_report:
                n = sum(1 for l in chunks["out"] if l.startswith("TL ") and "kind=sample" in l)
                log(f"    ... running for {now - t0:.0f} s, {n} samples so far (timeout {timeout:.0f} s)")
                next_report = now + progress_every
    exited.close()
    for t in readers:
        t.join(timeout=5)
    return status, "".join(chunks["out"]), "".join(chunks["err"])


class _ExitWaiter:
    """wait(timeout) for a child: its exit status, or subprocess.TimeoutExpired after timeout
    seconds. Through a pidfd (Linux 5.3) it returns as the child ends; Popen.wait(timeout)
    polls with sleeps growing to 50 ms, which cost every short command (a cached plugin
    build, an empty program under the model) up to 50 ms: docs/performance.md."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        try:
            self.fd: int | None = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # no pidfd here: Popen's own polling
            self.fd = None

    def __call__(self, timeout: float) -> int:
        import select
        if self.fd is None:
            return self.proc.wait(timeout=timeout)
        if self.proc.returncode is None and not select.select([self.fd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(self.proc.args, timeout)
        return self.proc.wait()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def tail(text: str, n: int = CONSOLE_TAIL_LINES) -> str:
    lines = text.strip().splitlines()
    return "\n".join(lines[-n:])
