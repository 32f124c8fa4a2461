"""70 Docker: the image the README's Docker section documents, built from the real
Dockerfile and run the documented way (--network none, --user, a mounted /results).

Skipped, with the reason, when no Docker engine answers (or TRAPLINE_SKIP_DOCKER=1).
With no registry here the base image comes from .ci/docker-base.sh (Debian packages,
mmdebstrap, docker import) and reaches the unchanged Dockerfile through its BASE
build argument. A cold build takes about 20 minutes on 2 cores (the guest kernels);
the image is tagged (TRAPLINE_DOCKER_IMAGE, default trapline:test) so a second
session reuses Docker's layer cache and builds in seconds. Build time, image size and
run time are printed (docs/docker.md has the figures measured here).

Environment: TRAPLINE_DOCKER_BASE (default trapline-base:bookworm), TRAPLINE_DOCKER_IMAGE,
TRAPLINE_DOCKER_UID (the uid the container runs as; default the caller's, or 1000
when the tests run as root, so ownership is checked for a non-root uid)."""

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, trapline
from trapline import experiment

BASE = os.environ.get("TRAPLINE_DOCKER_BASE", "trapline-base:bookworm")
IMAGE = os.environ.get("TRAPLINE_DOCKER_IMAGE", "trapline:test")
# The build's pip reads the pinned wheels from a local wheelhouse served on this
# port (fixed, so the build argument, and with it Docker's layer cache, stays the
# same from one session to the next); TRAPLINE_DOCKER_WHEELS=0 lets pip use PyPI.
WHEEL_PORT = int(os.environ.get("TRAPLINE_DOCKER_WHEEL_PORT", "38461"))


def _docker_problem() -> str | None:
    if os.environ.get("TRAPLINE_SKIP_DOCKER") == "1":
        return "TRAPLINE_SKIP_DOCKER=1"
    if shutil.which("docker") is None:
        return "no docker command on PATH"
    try:
        r = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                           timeout=60)
    except subprocess.TimeoutExpired:
        return "`docker info` did not answer within 60 s"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["no output"])[-1]
        return f"no Docker engine: `docker info` failed ({last})"
    return None


_problem = _docker_problem()
pytestmark = pytest.mark.skipif(_problem is not None, reason=f"Docker test skipped: {_problem}")


def _say(request, msg: str) -> None:
    """Print past pytest's capture: the measured figures belong in the log."""
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if capman is not None:
        with capman.global_and_fixture_disabled():
            print(f"\ndocker: {msg}", flush=True)
    else:
        print(f"docker: {msg}")


def _run(cmd, timeout, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def _ids(list_output: str) -> list[str]:
    return [line.split()[0] for line in list_output.splitlines() if line.strip()]


def _uid_gid() -> tuple[int, int]:
    if "TRAPLINE_DOCKER_UID" in os.environ:
        uid = int(os.environ["TRAPLINE_DOCKER_UID"])
        return uid, uid
    if os.getuid() == 0:
        return 1000, 1000
    return os.getuid(), os.getgid()


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory, request):
    """docker build arguments that make the build's pip install the pinned Python
    packages from a local wheelhouse instead of PyPI: the image then needs no network
    beyond the Debian mirror, and gets exactly the versions of the venv running these
    tests (its `pip freeze` constrains them). The wheels are fetched (or built) by
    this machine's pip, with its proxy and CA settings, and served on 127.0.0.1,
    which the build reaches with --network host."""
    if os.environ.get("TRAPLINE_DOCKER_WHEELS", "1") == "0":
        yield []
        return
    d = tmp_path_factory.mktemp("wheels")
    freeze = _run([sys.executable, "-m", "pip", "freeze"], 120).stdout.splitlines()
    (d / "constraints.txt").write_text("\n".join(l for l in freeze if "==" in l and not l.startswith("-")) + "\n")
    # pip wheel, not pip download: packages published as source only (pycachesim)
    # are built here, so the build's pip needs no setuptools from an index;
    # --use-pep517 builds them in an isolated environment with setuptools and wheel
    # from the index (the venv has no 'wheel', and setup.py bdist_wheel needs it)
    r = _run(["nice", "-n", "10", sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--use-pep517",
              "-w", str(d / "wheels"), "-r", str(ROOT / "requirements.txt"), "-c", str(d / "constraints.txt")], 1800)
    assert r.returncode == 0, f"pip wheel of the pinned packages failed:\n{r.stderr[-3000:]}"
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(WHEEL_PORT), "--bind", "127.0.0.1",
                               "--directory", str(d / "wheels")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", WHEEL_PORT), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None, f"the wheelhouse server could not listen on port {WHEEL_PORT}"
                time.sleep(0.1)
        _say(request, f"wheelhouse: {len(list((d / 'wheels').iterdir()))} wheels on 127.0.0.1:{WHEEL_PORT}")
        yield ["--build-arg", f"PIP_FIND_LINKS=http://127.0.0.1:{WHEEL_PORT}/", "--build-arg", "PIP_NO_INDEX=1"]
    finally:
        server.terminate()
        server.wait(timeout=30)


def _gem5_build_arg(request) -> str:
    """GEM5 for the image: the gem5 the native tests run (binary.for_tests: trapline's build
    when this machine has one, else the shared stock binary), copied into the build context's
    git-ignored gem5-bin/ (a plain build would build trapline's gem5 from source, about 50
    minutes: docs/docker.md); none without any."""
    from trapline.platforms.gem5 import binary
    try:
        g = binary.for_tests()
    except binary.Gem5Missing:
        return "none"
    dst = ROOT / "gem5-bin" / "gem5.opt"
    dst.parent.mkdir(exist_ok=True)
    if not dst.exists() or binary.sha256_of(dst) != binary.sha256_of(g):
        shutil.copy2(g, dst)
    _say(request, f"gem5 for the image: {binary.described(binary.facts(g))}")
    return "gem5-bin/gem5.opt"


def _hand_over_guest_kernels(request) -> None:
    """The guest Linux kernels this machine built (the suite's runs did, or this does) into
    the build context's git-ignored linux-cache/, where the Dockerfile's step 3 takes each
    one whose content hash is the image's own instead of compiling it again (about 14 of
    a cold build's 19 minutes); a kernel of other inputs is built there as before."""
    from trapline import images
    dst = ROOT / "linux-cache"
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir()
    for arch in images.ARCHES:
        src = Path(images.build_image(arch, None).facts["LINUX_CACHE"])
        shutil.copytree(src, dst / src.name)
    _say(request, f"guest kernels handed to the build: {', '.join(sorted(p.name for p in dst.iterdir()))}")


@pytest.fixture(scope="module")
def image(request, wheelhouse):
    """The base image (made once), then `docker build` of the repository's Dockerfile."""
    gem5_arg = _gem5_build_arg(request)
    _hand_over_guest_kernels(request)
    t0 = time.monotonic()
    r = _run([str(ROOT / ".ci" / "docker-base.sh"), BASE], 1800)
    assert r.returncode == 0, f".ci/docker-base.sh {BASE} failed:\n{r.stdout}{r.stderr[-4000:]}"
    _say(request, f"base {BASE}: ready in {time.monotonic() - t0:.0f} s")

    t0 = time.monotonic()
    r = _run(["nice", "-n", "10", "docker", "build", "--network", "host", "--build-arg", f"BASE={BASE}", *wheelhouse,
              "--build-arg", f"GEM5={gem5_arg}", "-t", IMAGE, str(ROOT)], 3 * 3600)
    build_s = time.monotonic() - t0
    assert r.returncode == 0, f"docker build failed after {build_s:.0f} s:\n{(r.stdout + r.stderr)[-6000:]}"
    size = int(_run(["docker", "image", "inspect", "-f", "{{.Size}}", IMAGE], 60).stdout.strip())
    cached = r.stdout.count("Using cache")
    _say(request, f"image {IMAGE}: built in {build_s:.0f} s ({cached} cached steps), size {size / 1e9:.2f} GB")
    return {"tag": IMAGE, "build_s": build_s, "size": size}


@pytest.fixture(scope="module")
def docker_run(image, tmp_path_factory, request):
    """`reproduce-all --quick` in a container, the way the README says to run it."""
    uid, gid = _uid_gid()
    results = tmp_path_factory.mktemp("docker") / "results"
    results.mkdir()
    if os.getuid() == 0:
        os.chown(results, uid, gid)
    t0 = time.monotonic()
    r = _run(["docker", "run", "--rm", "--network", "none", "--user", f"{uid}:{gid}",
              "-v", f"{results}:/results", image["tag"], "reproduce-all", "--quick"], 3600)
    run_s = time.monotonic() - t0
    _say(request, f"docker run reproduce-all --quick: {run_s:.0f} s (uid {uid}), status {r.returncode}")
    assert r.returncode == 0, f"docker run failed:\n{r.stdout}{r.stderr[-6000:]}"
    return {"results": results, "uid": uid, "gid": gid, "stdout": r.stdout, "stderr": r.stderr, "seconds": run_s,
            "final": (results / "latest").resolve()}


def test_run_needs_no_install_and_no_build(docker_run):
    """run.sh found every package (dpkg-query), the venv, kernels and images in the
    image: nothing was installed or built at run time (and --network none allowed
    nothing to be fetched)."""
    err = docker_run["stderr"]
    for needle in ("installing Debian packages", "missing Debian packages", "creating the Python environment",
                   "building kernels for", "build.sh: waiting", ": building"):
        assert needle not in err, f"the container tried to {needle!r}:\n{err[-3000:]}"


def test_summary_has_every_experiment_and_no_failure(docker_run):
    summary = json.loads((docker_run["final"] / "summary.json").read_text())
    native_ids = _ids(trapline("list").stdout)
    assert native_ids, "`python -m trapline list` listed nothing"
    got = {e["id"] for e in summary["experiments"]}
    assert got == set(native_ids), f"missing: {set(native_ids) - got}, extra: {got - set(native_ids)}"
    bad = [(e["id"], e["platform"], e["note"]) for e in summary["experiments"] if e["status"] == "failed"]
    assert not bad, bad
    assert summary["quick"] is True


def _host_figures_interleaved(eid: str, docker_run, tmp_path_factory, times: int = 5):
    """The headline figure of `run <eid> --platform host --quick`, natively and in the
    image (as docker_run runs it), `times` each, alternating: ([native], [docker])."""
    uid, gid = docker_run["uid"], docker_run["gid"]
    native, docker = [], []
    for i in range(times):
        nat_root = tmp_path_factory.mktemp(f"host-native-{eid}")
        r = trapline("run", eid, "--platform", "host", "--quick", env={"TRAPLINE_RESULTS": str(nat_root)})
        assert r.returncode == 0, f"native run {eid} --platform host failed:\n{r.stdout}{r.stderr[-3000:]}"
        native.append(json.loads((nat_root / "latest" / "summary.json").read_text())["experiments"][0]["reproduced"])
        dock_root = tmp_path_factory.mktemp(f"host-docker-{eid}")
        if os.getuid() == 0:
            os.chown(dock_root, uid, gid)
        r = _run(["docker", "run", "--rm", "--network", "none", "--user", f"{uid}:{gid}", "-v",
                  f"{dock_root}:/results", IMAGE, "run", eid, "--platform", "host", "--quick"], 600)
        assert r.returncode == 0, f"docker run {eid} --platform host failed:\n{r.stdout}{r.stderr[-3000:]}"
        docker.append(json.loads((dock_root / "latest" / "summary.json").read_text())["experiments"][0]["reproduced"])
    return native, docker


def test_same_entries_and_statuses_as_the_native_run(docker_run, quick_all, request, tmp_path_factory):
    """The same (id, platform) entries as a native `reproduce-all --quick` (the
    quick_all fixture, shared with the host and guest lane tests), with the same
    statuses. The guest lane's facts are exact counts, so they must agree to the
    last figure; host timings differ run to run, only their statuses are compared."""
    docker = {(e["id"], e["platform"]): e for e in json.loads((docker_run["final"] / "summary.json").read_text())
              ["experiments"]}
    native = {(e["id"], e["platform"]): e for e in quick_all["summary"]["experiments"]}
    assert set(docker) == set(native)
    # the native run has gem5 switched off (quick_all: GEM5=none); the image's gem5 lanes ran
    # with the gem5 it was built with: figures, not not-applicable, where that gem5 can run them
    gem5 = {k: docker[k] for k in docker if k[1] == "gem5"}
    ran = {k for k, e in gem5.items() if e["status"] in ("reproduced", "differs")}
    _say(request, f"gem5 in the image: {len(ran)} of {len(gem5)} gem5 lanes with figures")
    assert ("loop-order", "gem5") in ran, gem5[("loop-order", "gem5")]["status"]
    facts = json.loads((docker_run["final"] / "entries" / "loop-order.gem5.json").read_text())["platform_facts"]
    if facts.get("gem5_build") == "trapline":  # trapline's gem5: the lanes that need its changes ran too
        assert {("x86-split-lock", "gem5"), ("numa-first-touch", "gem5"), ("sparc-strong-prefetch", "gem5")} <= ran
        if "sparc-unaligned-trap" in facts.get("gem5_changes", []):
            assert ("sparc-misalign-trap", "gem5") in ran
    native = {k: e for k, e in native.items() if k[1] != "gem5"}
    differ = {k: (native[k]["status"], docker[k]["status"]) for k in native
              if native[k]["status"] != docker[k]["status"]}
    # a host timing ratio measured near its criterion's bound may land either side of
    # it from one run to the next (plt-itlb's quick figure: 7.4x to 10.5x against 10x);
    # such a host entry may be reproduced in one run and differs in the other, nothing else
    def near_bound(k):
        bounds = [b for b in experiment.get(k[0]).platform(k[1]).get("reproduced_if", {}).values() if b]
        figures = [e[k]["reproduced"] for e in (native, docker) if e[k].get("reproduced")]
        return any(1 / 1.5 < f / b < 1.5 for f in figures for b in bounds)
    noisy = {k: v for k, v in differ.items() if k[1] == "host" and set(v) == {"reproduced", "differs"}
             and near_bound(k)}
    _say(request, f"statuses: {len(native) - len(differ)}/{len(native)} entries as in the native run"
                  + (f"; different (native, docker): {differ}" if differ else "")
                  + (f"; of those, host figures within 1.5x of their criterion: {sorted(noisy)}" if noisy else ""))
    differ = {k: v for k, v in differ.items() if k not in noisy}
    # a host timing entry whose status still differs is measured again, five times each
    # way, interleaved: the image measures as the native run does if the figures of the
    # two overlap (a host's figure moves from one process to the next: where the loader
    # places 26 libraries, what else the machine runs); disjoint figures are a difference
    rerun = {k: _host_figures_interleaved(k[0], docker_run, tmp_path_factory) for k in differ if k[1] == "host"}
    for k, (nat, dock) in rerun.items():
        _say(request, f"{k[0]} on the host, measured again five times each way: native "
                      f"{', '.join(f'{f:.3g}' for f in nat)}; docker {', '.join(f'{f:.3g}' for f in dock)}")
    overlapping = {k for k, (nat, dock) in rerun.items() if min(dock) <= max(nat) and min(nat) <= max(dock)}
    differ = {k: v for k, v in differ.items() if k not in overlapping}
    assert not differ, f"statuses differ (native, docker): {differ}" + "".join(
        f"; {k[0]} measured again: native {rerun[k][0]}, docker {rerun[k][1]}" for k in differ if k in rerun)
    # deterministic lanes (the qemu lane's counts, user-mode model runs) agree to the
    # last digit; the model's guest lane only nearly (docs/model.md): within 0.01%
    # under -icount (the sun4u guest: up to 7e-5 between runs), within 1% for the
    # two-vCPU x86_64 guest, which runs without -icount (numa-first-touch: 0.16%)
    def deterministic(e):
        return e["platform"] == "qemu" or (e["platform"] == "model"
                                           and e.get("platform_facts", {}).get("deterministic", True))
    exact = {k: (native[k]["reproduced"], docker[k]["reproduced"]) for k in native
             if deterministic(native[k]) and native[k]["reproduced"] != docker[k]["reproduced"]}
    assert not exact, f"guest-lane or model figures differ (native, docker): {exact}"
    close = {k: (native[k]["reproduced"], docker[k]["reproduced"]) for k in native
             if native[k]["platform"] == "model" and not deterministic(native[k])
             and abs(docker[k]["reproduced"] / native[k]["reproduced"] - 1)
             > (1e-4 if native[k]["platform_facts"].get("icount") else 0.01)}
    assert not close, f"guest-lane model figures differ by more than allowed (native, docker): {close}"


def test_report_and_manifest(docker_run):
    final = docker_run["final"]
    assert final.parent == docker_run["results"], "latest must be a relative link inside the mounted directory"
    html = (final / "report.html").read_text()
    assert len(html) > 1000 and "</html>" in html.lower()
    for name in ("summary.csv", "groups.csv", "report.md", "manifest.json"):
        assert (final / name).is_file(), name
    manifest = json.loads((final / "manifest.json").read_text())
    assert manifest["environment"] == {"TRAPLINE_CACHE": "/opt/trapline/cache", "TRAPLINE_RESULTS": "/results"}
    assert manifest["git"]["commit"] != "unknown", "the image should carry the commit it was built from"


def test_every_result_file_is_owned_by_the_calling_uid(docker_run):
    uid, gid = docker_run["uid"], docker_run["gid"]
    paths = [docker_run["results"], *docker_run["results"].rglob("*")]
    assert len(paths) > 20
    wrong = [(str(p), os.lstat(p).st_uid, os.lstat(p).st_gid) for p in paths
             if (os.lstat(p).st_uid, os.lstat(p).st_gid) != (uid, gid)]
    assert not wrong, wrong[:10]


def test_list_and_run_with_set_work_like_run_sh(image, tmp_path):
    """`docker run IMAGE list` prints what ./run.sh list prints; `run ID --set k=v`
    takes and rejects keys the same way."""
    r = _run(["docker", "run", "--rm", "--network", "none", image["tag"], "list"], 300)
    assert r.returncode == 0, r.stderr
    assert r.stdout == trapline("list").stdout

    results = tmp_path / "results"
    results.mkdir(mode=0o777)
    results.chmod(0o777)
    uid, gid = _uid_gid()
    base = ["docker", "run", "--rm", "--network", "none", "--user", f"{uid}:{gid}", "-v", f"{results}:/results",
            image["tag"], "run", "loop-order", "--platform", "host", "--quick"]
    r = _run(base + ["--set", "rows=512", "--set", "cols=512"], 600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().startswith("/results/") and r.stdout.strip().endswith("report.html")
    summary = json.loads((results / "latest" / "summary.json").read_text())
    assert summary["sets"] == {"rows": "512", "cols": "512"}
    r = _run(base + ["--set", "colour=red"], 600)
    assert r.returncode == 2
    assert "unknown key 'colour' for loop-order on host; valid choices:" in r.stderr


def _apt_policy(pkgs: list[str]) -> dict[str, tuple[str, str]]:
    """{package: (installed, candidate)} from this machine's apt."""
    out = _run(["apt-cache", "policy", *pkgs], 120).stdout
    got, pkg = {}, None
    for line in out.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            pkg = line[:-1].split(":")[0]
        elif pkg and line.strip().startswith(("Installed:", "Candidate:")):
            inst, cand = got.get(pkg, ("", ""))
            v = line.split(":", 1)[1].strip()
            got[pkg] = (v, cand) if line.strip().startswith("Installed:") else (inst, v)
    return got


# The packages whose version decides the binaries and the figures: the compilers,
# the guest kernel's source and QEMU. The image must have exactly the versions
# installed here (else its results are not comparable with the native ones).
DECISIVE = ("make", "gcc", "binutils", "libc6-dev", "linux-source-6.1", "qemu-user", "qemu-system-")


def test_the_image_took_the_guest_kernels_handed_over(image, request):
    """Step 3 took each handed-over kernel whose content hash is the image's (its
    manifest, build time and all, is the native one byte for byte: not compiled again);
    a kernel of other inputs (another compiler version in the base) was built there."""
    handed = {p.name: (p / "manifest.txt").read_bytes() for p in (ROOT / "linux-cache").iterdir()}
    r = _run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "sh", image["tag"], "-c",
              "cd /opt/trapline/cache/images && for d in *-linux-*; do echo \"== $d\"; cat \"$d/manifest.txt\"; done"], 300)
    assert r.returncode == 0, r.stderr[-2000:]
    inside = {blk.split("\n", 1)[0]: blk.split("\n", 1)[1].encode() for blk in r.stdout.split("== ")[1:]}
    assert len(inside) == 3, sorted(inside)
    same = sorted(set(inside) & set(handed))
    assert all(inside[k] == handed[k] for k in same), [k for k in same if inside[k] != handed[k]]
    _say(request, f"guest kernels taken from the native build: {len(same)} of 3 ({', '.join(same) or 'none'})")


def test_same_packages_as_the_native_path(image, request):
    """The image has every package of run.sh's list, at the version a native
    install from the same mirror gets (this machine's apt candidate), and the
    compilers, kernel source and QEMU at the versions installed here."""
    from trapline import images
    pkgs = subprocess.run(["bash", "-c", 'eval "$(sed -n "/^APT_PACKAGES=(/,/)/p" run.sh)"; '
                                         'printf "%s\\n" "${APT_PACKAGES[@]}"'],
                          capture_output=True, text=True, cwd=ROOT, check=True).stdout.split()
    assert len(pkgs) > 10
    fmt = "${Package} ${Version}\\n"
    inside = _run(["docker", "run", "--rm", "--network", "none", "--entrypoint", "dpkg-query", image["tag"],
                   "-W", f"-f={fmt}", *pkgs], 120)
    assert inside.returncode == 0, inside.stderr
    inside_v = dict(line.split() for line in inside.stdout.splitlines())
    assert set(inside_v) == set(pkgs)
    if shutil.which("apt-cache") is None:
        pytest.skip("no apt here to compare versions with")
    policy = _apt_policy(pkgs)
    not_candidate = {p: (v, policy[p][1]) for p, v in inside_v.items()
                     if p in policy and policy[p][1] not in ("", "(none)") and v != policy[p][1]}
    assert not not_candidate, f"image version differs from this machine's apt candidate: {not_candidate}"
    decisive = {p: (v, policy[p][0]) for p, v in inside_v.items()
                if p.startswith(DECISIVE) and p in policy and policy[p][0] not in ("", "(none)") and v != policy[p][0]}
    assert not decisive, f"compiler, kernel source or QEMU differ from the native install (image, here): {decisive}"
    older = {p: policy[p][0] for p, v in inside_v.items() if p in policy and policy[p][0] not in ("(none)", v)}
    if older:
        _say(request, f"installed here at other versions than in the image (not decisive): {older}")
    for arch, binary in images.QEMU_BINARY.items():
        if shutil.which(binary):
            got = _run(["docker", "run", "--rm", "--network", "none", "--entrypoint", binary, image["tag"],
                        "--version"], 120).stdout.splitlines()[:1]
            assert got == _run([binary, "--version"], 60).stdout.splitlines()[:1], arch


def test_simulate_with_a_mounted_machine_description(image, tmp_path):
    """`docker run IMAGE simulate` with the user's own machine file and program,
    both mounted: the machine is read from the file, --set applies on top of it."""
    if shutil.which("gcc") is None:
        pytest.skip("no gcc here to build the static test program")
    work = tmp_path / "work"
    work.mkdir()
    (work / "prog.c").write_text("#include <stdio.h>\nstatic int a[4096];\nint main(void) { long s = 0;\n"
                                 "  for (int i = 0; i < 4096; i++) s += a[i] += i;\n"
                                 "  printf(\"%ld\\n\", s); return 0; }\n")
    r = _run(["gcc", "-O1", "-static", "-o", str(work / "prog"), str(work / "prog.c")], 120)
    if r.returncode != 0:
        pytest.skip(f"cannot link a static test program here: {r.stderr[-300:]}")
    src = ROOT / "gem5_configs" / "machines" / "generic-2020s-x86.yaml"
    text = src.read_text().replace("name: generic-2020s-x86", "name: mine", 1)
    assert "name: mine" in text
    (work / "mine.yaml").write_text(text)
    work.chmod(0o755)
    uid, gid = _uid_gid()
    r = _run(["docker", "run", "--rm", "--network", "none", "--user", f"{uid}:{gid}", "-v", f"{work}:/work:ro",
              image["tag"], "simulate", "--machine", "/work/mine.yaml", "--arch", "x86_64",
              "--set", "caches.l1d.size=16kB", "--", "/work/prog"], 600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    assert out["machine"] == "mine" and out["exit_status"] == 0
    assert out["sets"] == ["caches.l1d.size=16kB"]
    assert out["stats"]["options"]["l1d_size"] == 16384
    assert out["stats"]["total"]["instructions"] > 10000
    assert "8386560" in r.stderr  # the program's own output (sum of 0..4095)


def _gem5_inputs() -> list[str]:
    """What the Dockerfile's gem5-inputs stage copies from the build context (its COPY sources;
    a wildcard one, the optional gem5-src*, left out)."""
    stage = (ROOT / "Dockerfile").read_text().split("AS gem5-inputs\n", 1)[1].split("\nFROM ", 1)[0]
    return [src.rstrip("/") for line in stage.splitlines() if line.startswith("COPY ")
            for src in line.split()[1:-1] if "*" not in src]


def _gem5_stage_build(ctx: Path) -> str:
    r = _run(["docker", "build", "--network", "host", "--build-arg", f"BASE={BASE}", "--build-arg", "GEM5=none",
              "--target", "gem5", "-t", "trapline-gem5-stage:test", str(ctx)], 1800)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    return r.stdout


def _build_step_cached(out: str) -> bool:
    """Whether the gem5 stage's build step (its RUN) came from the layer cache."""
    lines = out.splitlines()
    (i,) = [k for k, line in enumerate(lines) if line.startswith("Step ") and "RUN mkdir -p /opt/gem5" in line]
    return lines[i + 1].strip() == "---> Using cache"


def test_the_gem5_stage_stays_cached_when_a_readme_or_run_sh_changes_and_rebuilds_for_a_patch(tmp_path):
    """The image's gem5 stage (about an hour when it compiles) depends on what the build reads:
    an edit to a change's README or to run.sh keeps its build layer; an edit to a patch does not.
    Built from a copy of what the stage copies, with GEM5=none (the build step then compiles
    nothing, and its layer is cached or not just the same)."""
    r = _run([str(ROOT / ".ci" / "docker-base.sh"), BASE], 1800)
    assert r.returncode == 0, r.stderr[-2000:]
    ctx = tmp_path / "ctx"
    for rel in ["Dockerfile", *_gem5_inputs()]:
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (ROOT / rel).is_dir() else shutil.copy2)(ROOT / rel, ctx / rel)
    _gem5_stage_build(ctx)
    with open(ctx / "gem5_configs" / "changes" / "bus-lock" / "README.md", "a") as f:
        f.write("\nan edit\n")
    with open(ctx / "run.sh", "a") as f:
        f.write("\n# an edit\n")
    assert _build_step_cached(_gem5_stage_build(ctx))
    patch = sorted((ctx / "gem5_configs" / "changes").glob("*/*.patch"))[0]
    with open(patch, "a") as f:  # an edit of its own (a layer from an earlier run of this test must not match)
        f.write(f"\n{time.time_ns()}\n")
    assert not _build_step_cached(_gem5_stage_build(ctx))
