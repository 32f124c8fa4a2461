"""gem5's SPARC lanes and the gem5 in the Docker image (issue 20 items 2 and 4).

Without gem5: `python -m trapline.gem5.binary` says how to get one (exit 1) and
refuses extra arguments (exit 2); the Dockerfile's GEM5 step comes after every
layer the image without gem5 builds (their cache and contents unchanged) and, run
as a shell snippet outside Docker, stops with one line on a GEM5 that is not an
executable file. With a real gem5 (conftest's gem5_binary; skipped, saying why,
without one): the step links the binary on PATH and caches its facts, which
`trapline.gem5.binary` then prints.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

DOCKERFILE = ROOT / "Dockerfile"


def _binary_cli(*args, env=None):
    e = dict(os.environ, PYTHONPATH=str(ROOT))
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "trapline.gem5.binary", *args], capture_output=True, text=True,
                          cwd=ROOT, env=e, timeout=300)


def test_binary_cli_without_gem5_says_how_to_get_one(tmp_path):
    r = _binary_cli(env={"GEM5": "", "PATH": str(tmp_path)})
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("trapline: failed: gem5 not found:") and "docs/gem5.md" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = _binary_cli("--version")
    assert r.returncode == 2 and "usage:" in r.stderr
    r = _binary_cli(str(tmp_path / "no-such-gem5"))
    assert r.returncode == 2 and "no-such-gem5: not an executable file" in r.stderr


def _gem5_step() -> str:
    """The shell of the Dockerfile's first GEM5 step (the root one): its `if [ -n "$GEM5" ]; then ... fi`."""
    text = DOCKERFILE.read_text().replace("\\\n", "")  # as Docker joins continued lines
    m = re.search(r'if \[ -n "\$GEM5" \]; then(.*?)\bfi\b', text, re.S)
    assert m, "the Dockerfile has no GEM5 step"
    return 'if [ -n "$GEM5" ]; then' + m.group(1) + "fi\n"


def test_dockerfile_gem5_step_comes_after_the_layers_of_the_image_without_gem5():
    lines = [ln for ln in DOCKERFILE.read_text().splitlines() if ln and not ln.startswith("#")]
    arg = next(i for i, ln in enumerate(lines) if ln.startswith("ARG GEM5"))
    copy_all = next(i for i, ln in enumerate(lines) if ln.startswith("COPY . ."))
    # a build argument changes the cache key of the RUN steps after its ARG only
    assert arg > copy_all
    assert not any("GEM5" in ln for ln in lines[:arg]), "an earlier layer depends on GEM5"


def test_dockerfile_gem5_step_refuses_a_path_that_is_not_an_executable(tmp_path):
    script = _gem5_step().replace("/usr/local/bin", str(tmp_path / "bin"))
    (tmp_path / "bin").mkdir()
    for bad in ("gem5-bin/no-such-gem5", "README.md"):
        r = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True,
                           env=dict(os.environ, GEM5=bad))
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip() == f"GEM5: '{bad}' is not an executable file in the build context (docs/docker.md)"
    assert not any((tmp_path / "bin").iterdir())
    r = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, env=dict(os.environ, GEM5=""))
    assert r.returncode == 0 and r.stdout == r.stderr == ""


def test_dockerfile_gem5_step_puts_the_binary_on_path_with_its_facts(gem5_binary, tmp_path):
    bindir, cache = tmp_path / "bin", tmp_path / "cache"
    bindir.mkdir()
    script = _gem5_step().replace("/usr/local/bin", str(bindir)).replace("./run.sh python", f"{sys.executable}")
    env = dict(os.environ, GEM5=str(gem5_binary), TRAPLINE_CACHE=str(cache), PYTHONPATH=str(ROOT),
               PATH=f"{bindir}:{os.environ['PATH']}")  # /usr/local/bin is on the image's PATH
    r = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    facts = json.loads(r.stdout)
    assert (bindir / "gem5.opt").resolve() == gem5_binary.resolve()
    assert facts["path"] == str(gem5_binary.resolve()) and "SPARC" in facts["isas"] and len(facts["sha256"]) == 64
    cached = json.loads((cache / "gem5" / "facts.json").read_text())
    assert facts["sha256"] in cached["probe"]
    # later, as another user with the cache read-only: found on PATH, the facts from the cache
    r = _binary_cli(env={"GEM5": "", "PATH": f"{bindir}:{os.environ['PATH']}", "TRAPLINE_CACHE": str(cache)})
    assert r.returncode == 0 and json.loads(r.stdout) == facts
