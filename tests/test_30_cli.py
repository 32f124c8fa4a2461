"""The CLI: list, and one-line exits with status 2 on bad input, before any
experiment runs."""

import pytest

from conftest import trapline
from trapline import experiment


def test_list_prints_every_id_with_its_description():
    r = trapline("list")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [l.split()[0] for l in lines] == list(experiment.load_all())
    assert all(len(l.split(None, 1)) == 2 for l in lines)


@pytest.mark.parametrize("args, needle", [
    (["run", "no-such-experiment"], "unknown experiment 'no-such-experiment'; valid choices: sparc-misalign-trap,"),
    (["run", "x86-split-lock", "--platform", "vax"], "unknown platform 'vax'; valid choices: host"),
    (["run", "x86-split-lock", "--platform", "host", "--set", "colour=red"],
     "unknown key 'colour' for x86-split-lock on host; valid choices:"),
    (["run", "x86-split-lock", "--set", "novalue"], "--set takes key=value, not 'novalue'"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["report", "no-such-run"], "unknown run 'no-such-run'"),
    (["build", "--arch", "mips"], "unknown arch 'mips'; valid choices: x86_64, sparc64, armv6"),
])
def test_bad_input_exits_2_with_one_line(results_dir, args, needle):
    r = trapline(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert not (results_dir / ".incomplete").exists() or not any((results_dir / ".incomplete").iterdir())


def test_valid_key_names_come_from_the_kernel(results_dir):
    r = trapline("run", "x86-split-lock", "--set", "colour=red")
    assert "offsets" in r.stderr and "target_us" in r.stderr
