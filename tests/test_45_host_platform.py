"""The host platform's process handling: a hung kernel is killed at its
timeout (with its children) and the error carries the tail of its output."""

import time

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
