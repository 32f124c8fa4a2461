"""Citing results: CITATION.cff against the catalogue, `cite` (BibTeX), `bundle`
(a deterministic tarball) and `verify` (hashes, then the deterministic model
lanes rerun byte-equal), on a real `run loop-order --quick` (host and model)."""

import datetime as dt
import hashlib
import io
import json
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, rebundle, trapline
from trapline import __version__, paths

CLAIMS = paths.shared("claims.md")
MONTHS = {m: i for i, m in enumerate(("January", "February", "March", "April", "May", "June", "July", "August",
                                      "September", "October", "November", "December"), 1)}


def _sources() -> dict[str, str]:
    """E<n> -> its "Source:" line in the catalogue."""
    out, cur = {}, None
    for line in CLAIMS.read_text().splitlines():
        m = re.match(r"## (E\d+) ", line)
        if m:
            cur = m.group(1)
        elif line.startswith("Source:") and cur:
            out[cur] = line
    return out


def test_citation_cff_lists_every_post_of_the_catalogue():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert str(cff["version"]) == __version__
    if not CLAIMS.exists():  # as test_15 does: the catalogue lives beside the clone, in ../shared
        pytest.skip("shared/claims.md is not beside this clone")
    sources = _sources()
    assert len(sources) >= 11
    refs = cff["references"]
    for e, src in sources.items():
        mine = [r for r in refs if r["notes"].startswith(f"{e} ")]
        assert mine, f"CITATION.cff has no reference for {e}"
        for r in mine:
            assert r["type"] == "blog" and r["authors"]
            assert f'"{r["title"]}"' in src, f"{e}: title {r['title']!r} is not in the catalogue's {src!r}"
            assert "url" not in r or r["url"] in src, f"{e}: a URL the catalogue does not give"
            day = re.search(r"(\d{1,2}) (" + "|".join(MONTHS) + r") (\d{4})", src)
            month = re.search(r"(" + "|".join(MONTHS) + r") (\d{4})", src)
            if day:
                want = dt.date(int(day.group(3)), MONTHS[day.group(2)], int(day.group(1))).isoformat()
                assert str(r["date-published"]) == want, e
            elif month:
                assert (r["year"], r["month"]) == (int(month.group(2)), MONTHS[month.group(1)]), e
            else:
                assert not {"date-published", "year", "month"} & set(r), f"{e}: a date the catalogue does not give"
            if "Gove" not in src:
                assert all(a.get("name") != "Darryl Gove" and a.get("family-names") != "Gove" for a in r["authors"])
    assert {r["notes"].split()[0] for r in refs} == set(sources)


# ------------------------------------------------------------------ one real run

@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """`run loop-order --quick` on every platform it lists (host, model and, where there is
    a gem5, gem5; without one its entry is not applicable), bundled."""
    from trapline.platforms.gem5 import binary
    root = tmp_path_factory.mktemp("cite") / "results"
    env = {"TRAPLINE_RESULTS": str(root)}
    try:
        env["GEM5"] = str(binary.for_tests())
    except binary.Gem5Missing:
        env["GEM5"] = ""
    r = trapline("run", "loop-order", "--quick", env=env)
    assert r.returncode == 0, r.stderr
    path = (root / "latest").resolve()
    b = trapline("bundle", path.name, env=env)
    assert b.returncode == 0, b.stderr
    return {"env": env, "path": path, "bundle": Path(b.stdout.strip()), "root": root}


BIB = re.compile(r"@(\w+)\{([^,\s{}]+),\n((?:  [a-z]+ = \{.*\},\n)+)\}\n")


def _bibtex(text: str) -> list[tuple[str, str, dict]]:
    entries = [(m.group(1), m.group(2), dict(re.findall(r"  ([a-z]+) = \{(.*)\},\n", m.group(3))))
               for m in BIB.finditer(text)]
    assert "".join(m.group(0) for m in BIB.finditer(text)).count("@") == text.count("@")
    for _, _, fields in entries:
        for v in fields.values():  # braces balance, LaTeX specials escaped
            depth = 0
            for c in re.sub(r"\\[{}]", "", v):
                depth += {"{": 1, "}": -1}.get(c, 0)
                assert depth >= 0, v
            assert depth == 0, v
            assert not re.search(r"(?<!\\)[_%&#$]", v), v
    return entries


def _content_hash(path: Path) -> str:
    lines = sorted(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.relative_to(path).as_posix()}\n"
                   for p in path.rglob("*") if p.is_file())
    lines.sort(key=lambda s: s.split("  ", 1)[1])
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def test_cite_prints_valid_bibtex_for_the_software_and_the_run(run):
    r = trapline("cite", env=run["env"])
    assert r.returncode == 0, r.stderr
    entries = _bibtex(r.stdout)
    assert [e[0] for e in entries] == ["software", "misc"]
    assert len({e[1] for e in entries}) == 2
    (_, _, sw), (_, key, rn) = entries
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert sw["version"] == __version__ and commit in sw["note"]
    assert sw["title"] == cff["title"] and sw["year"] == str(cff["date-released"])[:4]
    assert sw["author"] == "{" + cff["authors"][0]["name"] + "}"
    path = run["path"]
    manifest = json.loads((path / "manifest.json").read_text())
    assert path.name.replace("_", "-") in key and path.name in rn["title"]
    assert _content_hash(path) in rn["note"]
    assert hashlib.sha256((path / "manifest.json").read_bytes()).hexdigest() in rn["note"]
    assert manifest["git"]["commit"] in rn["note"] and "run loop-order -{}-quick" in rn["note"]
    assert rn["date"] == manifest["finished"][:10]
    # the same run named by id and by path: the same entries
    for arg in (path.name, str(path)):
        again = trapline("cite", arg, env=run["env"])
        assert again.returncode == 0 and again.stdout == r.stdout, again.stderr
    bad = trapline("cite", "no-such-run", env=run["env"])
    assert bad.returncode == 2 and "unknown run 'no-such-run'" in bad.stderr and len(bad.stderr.splitlines()) == 1


def test_bundle_is_deterministic_and_complete(run, tmp_path):
    data = run["bundle"].read_bytes()
    again = trapline("bundle", run["path"].name, "-o", str(tmp_path / "b.tar.gz"), env=run["env"])
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "b.tar.gz").read_bytes() == data, "the same run must give the same bundle bytes"
    assert data[4:8] == b"\0\0\0\0", "gzip header mtime must be 0"
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
        tar.extractall(tmp_path / "x")  # noqa: S202 (our own bundle, plain files)
    names = [m.name for m in members]
    assert names == sorted(names)
    assert {(m.uid, m.gid, m.uname, m.gname, m.mode) for m in members} == {(0, 0, "", "", 0o644)}
    assert len({m.mtime for m in members}) == 1
    top = tmp_path / "x" / run["path"].name
    own = {p.relative_to(run["path"]).as_posix() for p in run["path"].rglob("*") if p.is_file()}
    inside = {p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file()}
    assert inside == own | {"SHA256SUMS", ".zenodo.json"}
    for must in ("manifest.json", "summary.json", "summary.csv", "report.md", "report.html",
                 "entries/loop-order.model.json", "entries/loop-order.host.json", "raw/loop-order.model.log",
                 "plots/loop-order.model.png"):
        assert must in inside, must
    # SHA256SUMS is what coreutils checks, and lists every other file
    chk = subprocess.run(["sha256sum", "--strict", "-c", "SHA256SUMS"], cwd=top, capture_output=True, text=True)
    assert chk.returncode == 0, chk.stdout + chk.stderr
    assert len(chk.stdout.splitlines()) == len(inside) - 1
    z = json.loads((top / ".zenodo.json").read_text())
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert z["upload_type"] in ("software", "dataset") and z["version"] == __version__
    assert z["creators"] == [{"name": a["name"]} for a in cff["authors"]]
    assert len(z["references"]) == len(cff["references"])
    assert all(r["title"] in z["references"][i] for i, r in enumerate(cff["references"]))
    assert z["keywords"] == cff["keywords"] and run["path"].name in z["title"]
    assert _content_hash(run["path"]) in z["description"]


@pytest.mark.parametrize("args, needle", [
    (["bundle", "no-such-run"], "unknown run 'no-such-run'; valid choices:"),
    (["bundle", "latest", "-o", "{tmp}"], "is a directory; name the file to write"),
    (["cite", "{tmp}/"], "not a finished run or sweep directory (it has no manifest.json)"),
    (["verify", "{tmp}/none.tar.gz"], "no such bundle file; make one with ./run.sh bundle RUN"),
])
def test_bad_input_exits_2_with_one_line(run, tmp_path, args, needle):
    r = trapline(*[a.format(tmp=tmp_path) for a in args], env=run["env"])
    assert r.returncode == 2 and needle in r.stderr, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_verify_reruns_the_model_lane_and_skips_the_host(run):
    r = trapline("verify", str(run["bundle"]), env=run["env"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "skipped: loop-order.host (the host lane measures real time)" in r.stdout
    assert "rerunning loop-order on the model" in r.stdout
    if run["env"]["GEM5"]:  # gem5's simulated time and counts repeat bit for bit too
        assert "rerunning loop-order on the gem5" in r.stdout
        assert r.stdout.strip().splitlines()[-1].endswith(
            "OK: every file matches SHA256SUMS; 2 deterministic gem5 and model entries rerun byte-equal; 1 skipped")
    else:  # gem5's entry is not applicable (no gem5): nothing ran to rerun
        assert "skipped: loop-order.gem5 (not applicable: no kernel ran for it)" in r.stdout
        assert r.stdout.strip().splitlines()[-1].endswith(
            "OK: every file matches SHA256SUMS; 1 deterministic model entry rerun byte-equal; 2 skipped")


def test_verify_reruns_with_the_runs_machine_and_sets(tmp_path):
    """--machine and --set (a machine field and a kernel argument) are part of what
    the rerun repeats; with them the modelled misses move, so a rerun that dropped
    either would differ."""
    env = {"TRAPLINE_RESULTS": str(tmp_path / "results")}
    r = trapline("run", "loop-order", "--quick", "--machine", "generic-2020s-x86",
                 "--set", "caches.l1d.line=32B", "--set", "rows=256", env=env)
    assert r.returncode == 0, r.stderr
    b = trapline("bundle", env=env)
    assert b.returncode == 0, b.stderr
    v = trapline("verify", b.stdout.strip(), env=env)
    assert v.returncode == 0, v.stdout + v.stderr
    assert "rerunning loop-order on the model (machine " in v.stdout and "generic-2020s-x86.yaml)" in v.stdout
    rerun = Path(re.search(r"^rerun: (.*)$", v.stdout, re.M).group(1))
    first = json.loads((tmp_path / "results" / b.stdout.strip().rsplit("/", 1)[1].replace(".tar.gz", "")
                        / "entries" / "loop-order.model.json").read_text())
    again = json.loads((rerun / "entries" / "loop-order.model.json").read_text())
    assert again["platform_facts"]["machine"] == first["platform_facts"]["machine"] == "generic-2020s-x86"
    assert again["platform_facts"]["machine_sets"] == ["caches.l1d.line=32B"]
    assert again["commands"] == first["commands"] and "rows=256" in again["commands"][0]


def test_verify_fails_naming_a_file_with_one_byte_changed(run, tmp_path):
    def flip(files, top):
        name = f"{top}/entries/loop-order.model.json"
        d = bytearray(files[name])
        i = d.index(b'"reproduced": ') + len(b'"reproduced": ')
        d[i] = ord("8") if d[i] != ord("8") else ord("9")
        files[name] = bytes(d)

    bad = rebundle(run["bundle"], tmp_path / "flip.tar.gz", flip, resum=False)
    r = trapline("verify", str(bad), env=run["env"])
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED: entries/loop-order.model.json: its sha256 is not the one in SHA256SUMS" in r.stdout
    assert "rerunning" not in r.stdout and "Traceback" not in r.stderr

    def drop(files, top):
        del files[f"{top}/raw/loop-order.host.log"]
        files[f"{top}/extra.txt"] = b"x"

    bad = rebundle(run["bundle"], tmp_path / "drop.tar.gz", drop, resum=False)
    r = trapline("verify", str(bad), env=run["env"])
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED: raw/loop-order.host.log: listed in SHA256SUMS but missing from the bundle" in r.stdout
    assert "FAILED: extra.txt: in the bundle but not listed in SHA256SUMS" in r.stdout

    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(run["bundle"].read_bytes()[:200])
    r = trapline("verify", str(junk), env=run["env"])
    assert r.returncode == 1 and "not a readable trapline bundle" in r.stdout, r.stdout + r.stderr


def test_verify_rerun_names_an_edited_model_figure(run, tmp_path):
    """A consistent forgery (figure edited, SHA256SUMS regenerated) passes the hash
    check and is caught by the rerun, which names the entry and the field."""
    def edit(files, top):
        name = f"{top}/entries/loop-order.model.json"
        e = json.loads(files[name])
        e["reproduced"] *= 1.01
        files[name] = (json.dumps(e, indent=2) + "\n").encode()

    bad = rebundle(run["bundle"], tmp_path / "forged.tar.gz", edit, resum=True)
    r = trapline("verify", str(bad), env=run["env"])
    assert r.returncode == 1, r.stdout + r.stderr
    assert "files match SHA256SUMS" in r.stdout
    assert "FAILED: entries/loop-order.model.json: the rerun differs: reproduced: bundled" in r.stdout
    n = 2 if run["env"]["GEM5"] else 1  # the gem5 entry reruns equal beside it
    assert f"1 of {n} deterministic entries differ on rerun" in r.stdout


def test_cite_bundle_verify_on_a_reproduce_all_run(quick_all, tmp_path):
    """The issue's done-when: on the suite's `reproduce-all --quick` run (conftest),
    cite and bundle work, verify reruns exactly the user-mode model lanes and
    skips every other entry saying why, and one changed byte fails it by name."""
    from trapline import experiment
    user_mode = set()  # the model lanes that run the kernel in QEMU user mode, from the experiment files
    for e in experiment.load_all().values():
        spec = e.platform("model") if "model" in e.platforms else {}
        if spec and not spec.get("guest") and not spec.get("lockstep") and "not_applicable" not in spec:
            user_mode.add(e.id)  # (a lockstep lane runs threads on several vCPUs: not bit-for-bit)
    assert {"x86-split-lock", "loop-order", "sparc-strong-prefetch"} <= user_mode
    final = quick_all["final"]
    env = {"TRAPLINE_RESULTS": str(final.parent)}
    c = trapline("cite", str(final), env=env)
    assert c.returncode == 0, c.stderr
    assert [e[0] for e in _bibtex(c.stdout)] == ["software", "misc"]
    assert _content_hash(final) in c.stdout
    out = tmp_path / "all.tar.gz"
    b = trapline("bundle", str(final), "-o", str(out), env=env)
    assert b.returncode == 0 and b.stdout.strip() == str(out), b.stderr
    v = trapline("verify", str(out), env=env, timeout=900)
    assert v.returncode == 0, v.stdout + v.stderr
    rerun = re.search(r"^rerunning (.*) on the model$", v.stdout, re.M)
    assert rerun and set(rerun.group(1).split(", ")) == user_mode, v.stdout
    skipped = dict(re.findall(r"^skipped: (\S+) \((.*)\)$", v.stdout, re.M))
    entries = {f"{e['id']}.{e['platform']}" for e in quick_all["summary"]["experiments"]}
    assert set(skipped) == entries - {f"{i}.model" for i in user_mode}
    assert all(why == "a guest lane of the model: a booted kernel is not bit-for-bit repeatable"
               for k, why in skipped.items() if k.endswith(".model") and not why.startswith("not applicable")
               and k != "stl-alloc-scaling.model")
    assert skipped["stl-alloc-scaling.model"].startswith("a lockstep lane of the model"), skipped
    assert f"{len(user_mode)} deterministic model entries rerun byte-equal" in v.stdout

    def flip(files, top):
        name = f"{top}/entries/x86-split-lock.model.json"
        d = bytearray(files[name])
        d[len(d) // 2] ^= 0x01
        files[name] = bytes(d)

    bad = rebundle(out, tmp_path / "flip.tar.gz", flip, resum=False)
    r = trapline("verify", str(bad), env=env)
    assert r.returncode == 1 and "FAILED: entries/x86-split-lock.model.json:" in r.stdout, r.stdout + r.stderr
