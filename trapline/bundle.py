"""A run as one citable file, and checking one: `./run.sh bundle RUN [-o FILE]`
and `./run.sh verify BUNDLE`.

A bundle is a gzipped tarball with one top folder, <run-id>/, holding every file
of the finished run directory (manifest.json, summary.json/csv, groups.csv,
report.md/html, plots/, entries/, raw/), a `.zenodo.json` with the metadata an
upload to Zenodo reads, and SHA256SUMS over all of them (`sha256sum -c` reads it).
The same run always gives the same bytes: members sorted, mtime the run's finish
time, uid/gid 0, no owner names, mode 0644, gzip header without name or time.

verify checks, in order:
  1. every file: its sha256 is the one in SHA256SUMS, none missing, none extra;
  2. the deterministic lanes: each entry whose platform says its figures repeat
     bit for bit (Lane.why_not_repeatable, from the entry's platform_facts:
     today the model's user-mode lanes, not its lockstep or guest ones) is run
     again on its platform with the run's own arguments (--quick, --set, the
     machine), as an ordinary run in the results directory, and the new entry
     must equal the bundled one byte for byte as JSON, once the fields that are
     times or places of the run itself (VOLATILE) are taken out.
Every other entry (host, qemu, guest model lanes) is skipped with a line saying
why (its platform's words). Exit 0 with a summary line when all is equal, 1 naming each file that is not.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from trapline import cite, results
from trapline.errors import UsageError

# fields that say when or where a run happened, not what it found
VOLATILE = frozenset({"seconds", "wall_seconds", "started", "finished", "run_id", "path", "paths"})


# ------------------------------------------------------------------ writing

def zenodo_metadata(sw: cite.Software, rec: cite.RunRecord) -> dict:
    """.zenodo.json: what Zenodo shows for an upload of this bundle. The posts
    have no identifier in the catalogue, so they go in `references` (free text)."""
    args = rec.manifest.get("args", {})
    exps = args.get("experiments") or []
    return {
        "title": f"trapline results: {rec.kind} {rec.run_id}",
        "upload_type": "dataset",
        "description": (f"Results of trapline {rec.version} (git commit {rec.commit}"
                        f"{', with uncommitted changes' if rec.dirty else ''}), made by <code>{rec.command}</code> "
                        f"on {rec.date}: {len(exps)} experiment(s) reproducing measurements of the original "
                        f"blog posts below. Content sha256 {rec.content_sha256} (the sha256 of SHA256SUMS "
                        f"without its own line and .zenodo.json's); manifest.json sha256 {rec.manifest_sha256}. "
                        f"Check with ./run.sh verify on the bundle."),
        "creators": [{"name": a} for a in sw.authors],
        "version": rec.version,
        "publication_date": rec.date,
        "license": sw.license or None,
        "keywords": list(sw.keywords),
        "references": [r.text for r in sw.references],
        "related_identifiers": [],  # the catalogue gives no DOI or URL for the posts
        "notes": f"trapline run {rec.run_id}; experiments: {', '.join(exps)}",
    }


def _mtime(rec: cite.RunRecord) -> int:
    """The members' fixed mtime: when the run finished (0 if unknown)."""
    when = rec.manifest.get("finished") or ""
    try:
        return int(dt.datetime.fromisoformat(when).timestamp())
    except ValueError:
        return 0


def tarball(files: dict[str, bytes], top: str, mtime: int) -> bytes:
    """A deterministic .tar.gz of `files` ({relative path: bytes}) under `top`/."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            data = files[name]
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def write(run: str | None, output: str | None = None) -> Path:
    """Bundle a finished run; the tarball's path (default: <run-id>.tar.gz beside the run)."""
    path = cite.resolve(run)
    rec = cite.record(path)
    sw = cite.load_cff()
    files = {rel: (path / rel).read_bytes() for rel in rec.sums if rel not in cite.BUNDLE_ONLY}
    files[cite.ZENODO] = (json.dumps(zenodo_metadata(sw, rec), indent=2) + "\n").encode()
    files[cite.SUMS] = cite.sums_text({n: hashlib.sha256(b).hexdigest() for n, b in files.items()}).encode()
    out = Path(output).expanduser().resolve() if output else path.parent / f"{rec.run_id}.tar.gz"
    if out.is_dir():
        raise UsageError(f"-o {output}: is a directory; name the file to write, e.g. {out / (rec.run_id + '.tar.gz')}")
    results.atomic_write(out, tarball(files, rec.run_id, _mtime(rec)))
    return out


# ------------------------------------------------------------------ verifying

@dataclass
class Bundle:
    """A bundle's files as read back: {path under the top folder: bytes}."""
    top: str
    files: dict[str, bytes]
    path: Path | None = None  # the bundle file (named in messages)

    def json(self, name: str, kind: str = "manifest") -> dict:
        """One JSON file of the bundle (a run folder's file of `kind`: trapline/runfiles.py),
        checked; runfiles.Damaged naming the bundle, the file and the field if it is missing
        or damaged."""
        from trapline import runfiles
        where = f"{self.path.name if self.path else self.top}: {name}"
        fix = "the bundled run is damaged; bundle the run again from an intact copy"
        if name not in self.files:
            raise runfiles.Damaged(f"{where}: missing; {fix}")
        data = runfiles.parse(self.files[name], where, fix)
        if kind == "entry":
            key = PurePosixPath(name).name[:-len(".json")]
            exp_id, _, platform = key.rpartition(".")
            return runfiles.check_entry(data, where, exp_id, platform, fix)
        return runfiles.check(data, kind, where, fix)


def read(path: Path) -> Bundle:
    """The files of a bundle. Anything but plain files under one top folder is refused."""
    if not path.is_file():
        raise UsageError(f"{path}: no such bundle file; make one with ./run.sh bundle RUN")
    files: dict[str, bytes] = {}
    tops = set()
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            for m in tar:
                p = PurePosixPath(m.name)
                if not m.isfile() or p.is_absolute() or ".." in p.parts or len(p.parts) < 2:
                    raise ValueError(f"member {m.name!r} is not a plain file inside the bundle's folder")
                tops.add(p.parts[0])
                files[PurePosixPath(*p.parts[1:]).as_posix()] = tar.extractfile(m).read()
    except (tarfile.TarError, OSError, EOFError, ValueError, gzip.BadGzipFile) as e:
        raise BundleDamaged(f"{path}: not a readable trapline bundle ({e.__class__.__name__}: {e})") from None
    if len(tops) != 1:
        raise BundleDamaged(f"{path}: a bundle has one top folder (the run id), this one has "
                            f"{', '.join(sorted(tops)) or 'none'}")
    return Bundle(tops.pop(), files, path)


class BundleDamaged(Exception):
    """The bundle cannot be read at all (exit 1, like a failed check)."""


def check_sums(b: Bundle) -> list[str]:
    """One line per file that does not match SHA256SUMS (changed, missing or not listed)."""
    if cite.SUMS not in b.files:
        return [f"{cite.SUMS}: missing; every file of a bundle is listed there"]
    try:
        sums = cite.parse_sums(b.files[cite.SUMS].decode("utf-8", "replace"))
    except ValueError as e:
        return [str(e)]
    bad = []
    for name in sorted(set(sums) | set(b.files) - {cite.SUMS}):
        if name not in b.files:
            bad.append(f"{name}: listed in {cite.SUMS} but missing from the bundle")
        elif name not in sums:
            bad.append(f"{name}: in the bundle but not listed in {cite.SUMS}")
        elif hashlib.sha256(b.files[name]).hexdigest() != sums[name]:
            bad.append(f"{name}: its sha256 is not the one in {cite.SUMS} (the file was changed)")
    return bad


def deterministic(entry: dict) -> str | None:
    """None when the entry's figures must come out the same on every rerun; else why not
    (its platform says, from the entry's platform_facts)."""
    from trapline import platforms
    name = entry.get("platform")
    cls = platforms.find(str(name))
    if cls is None:
        return f"the {name} platform is not known to this checkout"
    facts = entry.get("platform_facts") or {}
    why = cls.lane_class(facts).why_not_repeatable(facts)
    if why:
        return why
    if not entry.get("commands"):
        return "not applicable: no kernel ran for it"
    return None


def comparable(obj):
    """The entry without the fields that are times or places of the run itself."""
    if isinstance(obj, dict):
        return {k: comparable(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [comparable(v) for v in obj]
    return obj


def first_difference(a, b, at: str = "") -> str:
    """Where two JSON values first differ, as 'field: bundled X, rerun Y'."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b or a[k] != b[k]:
                return first_difference(a.get(k), b.get(k), f"{at}.{k}" if at else k)
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{at}[{i}]")
    return f"{at or '(whole entry)'}: bundled {json.dumps(a)[:80]}, rerun {json.dumps(b)[:80]}"


def rerun(exp_ids: list[str], platform: str, quick: bool, sets: dict[str, str], machine: str | None) -> Path:
    """Run the `platform` lane of `exp_ids` again as the bundled run did; the new run
    directory. The one place verify calls the runner.

    The rerun is an ordinary run in the results directory, in this process's
    environment unchanged: before the model lane gave its kernels a fixed one
    (platforms/model.py, KERNEL_ENV), a longer TRAPLINE_RESULTS alone moved the
    kernel's stack and changed modelled figures in the 6th digit."""
    from trapline import runner
    command = "run" if len(exp_ids) == 1 else "reproduce-all"
    return runner.execute(command, exp_ids, platform, quick, sets, fresh=True, machine=machine).path


def _machine_arg(b: Bundle, entry: dict) -> str | None:
    """The --machine the run used for this entry: its machine file where it still
    exists (its sha256 is part of the compared entry), else the machine's name."""
    from trapline import experiment
    name = (entry.get("platform_facts") or {}).get("machine")
    try:
        default = experiment.get(entry["id"]).platform(entry["platform"]).get("machine")
    except Exception:
        default = None
    if not name or name == default:
        return None
    machines = b.json("manifest.json").get("platforms", {}).get(entry["platform"], {}).get("machines", {})
    for info in machines.values():  # keyed by name, plus the --set overrides
        f = info.get("file")
        if info.get("name") == name and f and (results.ROOT / f).is_file():
            return str(results.ROOT / f)
    return name


def rerun_deterministic(b: Bundle, args: dict, entries: dict[str, dict], log) -> tuple[list[str], int]:
    """Rerun every deterministic entry (one run per platform and machine) and compare; the
    keys that differ, and how many were compared. Every other entry: a 'skipped' line."""
    groups: dict[tuple[str, str | None], list[str]] = {}
    for key, e in entries.items():
        why = deterministic(e)
        if why:
            log(f"skipped: {key} ({why})")
            continue
        groups.setdefault((e["platform"], _machine_arg(b, e)), []).append(key)
    failed, checked = [], 0
    for (platform, machine), keys in groups.items():
        ids = [entries[k]["id"] for k in keys]
        log(f"rerunning {', '.join(ids)} on the {platform}" + (f" (machine {machine})" if machine else ""))
        new = rerun(ids, platform, bool(args.get("quick")), dict(args.get("sets") or {}), machine)
        log(f"rerun: {new}")
        for key in keys:
            checked += 1
            mine = new / "entries" / f"{key}.json"
            want = comparable(entries[key])
            got = comparable(json.loads(mine.read_text())) if mine.exists() else None
            if json.dumps(want, sort_keys=True) != json.dumps(got, sort_keys=True):
                failed.append(key)
                log(f"FAILED: entries/{key}.json: the rerun differs: {first_difference(want, got)}")
    return failed, checked


def verify(bundle: str, log=print) -> int:
    """`./run.sh verify BUNDLE`: 0 when every hash and every deterministic figure matches, else 1."""
    path = Path(bundle).expanduser().resolve()
    try:
        b = read(path)
    except BundleDamaged as e:
        log(f"FAILED: {e}")
        return 1
    bad = check_sums(b)
    for line in bad:
        log(f"FAILED: {line}")
    if bad:
        log(f"verify: {path.name}: {len(bad)} file(s) do not match {cite.SUMS}; the bundle was changed")
        return 1
    sums = cite.parse_sums(b.files[cite.SUMS].decode())
    log(f"{len(sums)} files match {cite.SUMS} (content sha256 {cite.content_hash(sums)})")
    manifest = b.json("manifest.json")  # (damaged: runfiles.Damaged, one line, exit 2)
    entries = {n[len("entries/"):-len(".json")]: b.json(n, "entry") for n in sorted(b.files)
               if n.startswith("entries/") and n.endswith(".json")}
    args = manifest.get("args", {})
    git = manifest.get("git", {})
    here = results.git_info()
    if git.get("commit") != here["commit"]:
        log(f"note: the run was made at commit {git.get('commit')}, this checkout is at {here['commit']}")
    for eid, info in sorted((manifest.get("experiments") or {}).items()):
        f = results.ROOT / info.get("file", "")
        if f.is_file() and results.sha256_file(f) != info.get("sha256"):
            log(f"note: {info['file']} has changed since the run (sha256 differs)")
    failed, checked = rerun_deterministic(b, args, entries, log)
    if failed:
        log(f"verify: {path.name}: {len(failed)} of {checked} deterministic entries differ on rerun")
        return 1
    skipped = len(entries) - checked
    rerun_on = sorted({e["platform"] for e in entries.values() if deterministic(e) is None})
    log(f"verify: {path.name} OK: every file matches {cite.SUMS}; {checked} deterministic "
        f"{' and '.join(rerun_on) + ' ' if rerun_on else ''}entr{'y' if checked == 1 else 'ies'} rerun byte-equal; {skipped} skipped")
    return 0
