"""The guest machinery shared by the QEMU lane and the timing model's guest
lane: boot an image (images/boot.sh), read its console into per-command
results, tell why a boot failed, and say which guest ran.

    b = guest.boot(image, ["/trapline/bin/x/y k=v"], timeout=120, log=log)
    for cmd in b.commands: cmd.status, cmd.output ...

With snapshot=True (the model's guest lane) the guest is not booted for every
run: the image is booted once to its init, which waits (tlg.wait=1), the
machine is saved to a file in the cache (snapshots/, keyed by everything the
restored machine must match) and every later run starts from that file with
the run's commands written into it (images/init/init.c, wait_for_payload).
A snapshot that is missing is made; one that does not match its checksum is
made anew; one that fails to load falls back to a boot, with a note in the
boot facts (docs/model.md, "Snapshots").
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from trapline import arch as arch_table, build
from trapline.errors import UsageError
from trapline.images import IMAGES, Image
from trapline.proc import run_command, tail, tool_version
from trapline.results import sha256_file

GUEST_BIN = "/trapline/bin"  # where an image holds the kernels (images/lib/initramfs.sh)
# Every guest reaches our /init within 5 s here (sun4u's OpenBIOS is the slowest);
# one that has printed no "TLG init" after this long is stuck before Linux runs.
INIT_TIMEOUT_S = 90


@dataclass
class GuestCommand:
    n: int
    argv: str
    status: str = "missing"     # exit code as text, sigN, timeout, or missing
    output: str = ""
    wall_s: float | None = None  # emulation time, not a prediction
    user_s: float | None = None
    sys_s: float | None = None


@dataclass
class Boot:
    status: int | None            # boot.sh: 0 done, 124 timeout, 125 no TLG done
    console: str
    stderr: str
    commands: list[GuestCommand] = field(default_factory=list)
    facts: dict = field(default_factory=dict)  # init_seen_s, done_seen_s, qemu_exit_s
    qemu_cmdline: str = ""


def run_line(commands: list[str], per_command_timeout: float) -> str:
    """The tlg.* parameters that tell our /init what to run (on the kernel
    command line, or in a snapshot's payload)."""
    for c in commands:
        if ";" in c or '"' in c:
            raise UsageError(f"a guest command cannot contain ';' or '\"': {c}")
    return f'tlg.timeout={int(per_command_timeout)} tlg.run="{";".join(commands)}"'


def append_line(commands: list[str], per_command_timeout: float) -> str:
    """The kernel command line that tells our /init what to run."""
    return "quiet " + run_line(commands, per_command_timeout)


def parse_console(console: str) -> list[GuestCommand]:
    cmds: dict[int, GuestCommand] = {}
    current: GuestCommand | None = None
    buf: list[str] = []
    for raw in console.splitlines():
        line = raw.rstrip("\r")
        m = re.match(r"^TLG (cmd|begin|end|time) (\d+)\s*(.*)$", line)
        if not m:
            if current is not None:
                buf.append(line)
            continue
        kind, n, rest = m.group(1), int(m.group(2)), m.group(3)
        c = cmds.setdefault(n, GuestCommand(n, ""))
        if kind == "cmd":
            c.argv = rest
        elif kind == "begin":
            current, buf = c, []
        elif kind == "end":
            c.output = "\n".join(buf) + "\n"
            sm = re.search(r"status=(\S+)", rest)
            c.status = sm.group(1) if sm else "?"
            current, buf = None, []
        elif kind == "time":
            for k, v in re.findall(r"(wall|user|sys)=([0-9.]+)", rest):
                setattr(c, f"{k}_s", float(v))
    return [cmds[k] for k in sorted(cmds)]


def _boot_env(image: Image, append: str, qemu_extra: list[str] | None, **more: str) -> dict:
    env = dict(os.environ, TRAPLINE_APPEND=append)
    for k in ("TRAPLINE_SNAPSHOT_SAVE", "TRAPLINE_SNAPSHOT_BREAK", "TRAPLINE_INCOMING", "TRAPLINE_DRY_RUN"):
        env.pop(k, None)
    env.update(arch_table.get(image.arch).boot_env(env))
    if qemu_extra:
        if any(" " in a for a in qemu_extra):
            raise UsageError(f"QEMU arguments may not contain spaces: {qemu_extra}")
        env["TRAPLINE_QEMU_EXTRA"] = " ".join(qemu_extra)
    if image.dtb:
        env["TRAPLINE_DTB"] = str(image.dtb)
    env.update(more)
    return env


def boot(image: Image, commands: list[str], timeout: float, per_command_timeout: float | None = None,
         log=None, qemu_extra: list[str] | None = None, snapshot: bool = False, program: Path | None = None) -> Boot:
    """Boot the image, run commands in order, return what the console said.
    boot.sh kills QEMU at timeout; this process adds a margin of its own.
    qemu_extra: more QEMU arguments (no spaces inside one; the timing model's
    -plugin and -icount). snapshot: start from the image's saved machine
    (made by a first boot) rather than booting; b.facts["snapshot"] says what
    happened. program (with snapshot): boot_from_snapshot."""
    if snapshot:
        return boot_from_snapshot(image, commands, timeout, per_command_timeout, log, qemu_extra, program)
    env = _boot_env(image, append_line(commands, per_command_timeout or timeout), qemu_extra)
    return _run_boot_sh(image, env, timeout, log)


def _run_boot_sh(image: Image, env: dict, timeout: float, log=None, init_timeout: float = INIT_TIMEOUT_S) -> Boot:
    cmd = ["bash", str(IMAGES / "boot.sh"), image.arch, str(image.kernel), str(image.initrd), str(int(timeout))]
    seen = []

    def on_line(line):
        if log and line.startswith("TLG cmd "):
            seen.append(line)
            log(f"    guest: {line.strip()[4:]}")

    t0 = time.monotonic()
    status, out, err = run_command(cmd, timeout + 60, env=env, on_line=on_line,
                                   marker="TLG init", marker_timeout=init_timeout)
    facts: dict = dict(re.findall(r"(init_seen_s|done_seen_s|ready_seen_s|qemu_exit_s)=(\S+)", err))
    facts["host_wall_s"] = f"{time.monotonic() - t0:.3f}"
    facts["images"] = image.builder  # which builder's image this guest booted (--images)
    qemu = next((l.split("qemu:", 1)[1].strip() for l in err.splitlines() if l.startswith("boot.sh: qemu:")), "")
    return Boot(status, out, err, parse_console(out), facts, qemu)


def reached_init(b: Boot) -> bool:
    return "TLG init" in b.console


def describe_failure(b: Boot, timeout: float) -> str | None:
    """None when the boot completed; else one message with the console tail."""
    if b.status == 0:
        return None
    if not reached_init(b):
        return (f"the guest did not reach its init (no 'TLG init' within {INIT_TIMEOUT_S} s) and QEMU was "
                f"killed; console tail:\n{tail(b.console)}\n{tail(b.stderr, 5)}")
    what = {124: f"the guest did not finish within {timeout:.0f} s and QEMU was killed",
            125: "QEMU ended before the guest printed 'TLG done' (kernel panic or crash)",
            None: "boot.sh itself hung and was killed"}.get(b.status, f"boot.sh failed with status {b.status}")
    return f"{what}; console tail:\n{tail(b.console)}"


def shell_quote(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def qemu_version(arch: str) -> str:
    return tool_version(arch_table.get(arch).qemu_system)


def guest_image_facts(arch: str, img: Image | None) -> dict:
    """What identifies a booted guest in a manifest: QEMU's version, the machine,
    the guest Linux's and initramfs's sha256 (the QEMU and the model's guest lane),
    and who built the image with what (images: the builder's provenance, e.g.
    Buildroot's version and the defconfig's sha256)."""
    return {"machine": arch_table.get(arch).machine_label, "qemu": qemu_version(arch),
            "linux_sha256": img.facts.get("LINUX_SHA256") if img else None,
            "initrd_sha256": img.facts.get("INITRD_SHA256") if img else None,
            "images": (img.provenance or {"builder": img.builder}) if img else None}


def command_line(c) -> str:
    """A lane's command (trapline.platforms.base.Command) as the guest runs it: its binary
    where the image holds the kernels, and its arguments."""
    return " ".join([f"{GUEST_BIN}/{c.kernel}/{c.binary}", *c.args])


def boot_once_more_if_silent(exp_id: str, image: Image, commands: list[str], timeout: float, log,
                             **kw) -> tuple[Boot, bool]:
    """Boot; a guest that never reached its init is booted once more (seen once
    here under heavy load: QEMU printed nothing at all; that is the emulator, not
    the experiment). Returns the boot and whether it was retried."""
    b = boot(image, commands, timeout, log=log, **kw)
    if b.status == 0 or reached_init(b):
        return b, False
    log(f"{exp_id}: the {image.arch} guest printed nothing before its init; booting it once more")
    return boot(image, commands, timeout, log=log, **kw), True


def command_outputs(b: Boot, commands: list[str], shown: list[list[str]], timeout: float,
                    under: str = "") -> tuple[list[str], str | None]:
    """What each guest command printed, in order, or the first failure (a boot
    that did not complete, a command never run or ending non-zero) as one
    message with the console's tail."""
    err = describe_failure(b, timeout)
    if err:
        return [], err
    outs = []
    for i, cmd in enumerate(commands):
        got = next((c for c in b.commands if c.n == i + 1), None)
        if got is None:
            return outs, f"the guest never ran command {i + 1} ({cmd}); console tail:\n{tail(b.console)}"
        if got.status != "0":
            return outs, (f"guest command {i + 1} ({' '.join(shown[i])}) ended with status {got.status}{under}; "
                          f"its output:\n{tail(got.output)}")
        outs.append(got.output)
    return outs, None


def guest_hashes(image: Image, bindir: Path, kernel: str) -> dict[str, str]:
    """sha256 of the experiment's binaries as the guest holds them (the image's own,
    image.bindir, where its builder compiled them, else bindir) and of the guest's
    Linux and initramfs."""
    bindir = image.bindir or bindir
    hashes = {f"{kernel}/{k}": v for k, v in build.binary_hashes(bindir / kernel).items()}
    hashes["guest/linux"] = image.facts.get("LINUX_SHA256", "")
    hashes["guest/initramfs"] = image.facts.get("INITRD_SHA256", "")
    return hashes




# ---------------------------------------------------------------------------
# Snapshots: boot once to init, save the machine, start later runs from it.

SNAPSHOT_FORMAT = 1            # bump when the entry's layout or the payload protocol changes
SNAPSHOT_APPEND = "quiet tlg.wait=1"  # the saved guest's kernel command line (init waits for its payload)
# sun4u is saved and restored with images/qemu-pagesize.c preloaded into QEMU
# (boot.sh, arch.snapshot_host_page: QEMU 7.2's RAM migration dies of SIGFPE on
# target pages larger than the host's, QEMU issue 1456); the file is in the key.
# A restored guest prints its `TLG init` within a second here; one that has not
# after this long did not resume (it is dropped, and the run boots instead).
RESTORE_INIT_TIMEOUT_S = 30
CHECK_INIT_TIMEOUT_S = 10  # the same for a new snapshot's trial restore (it is saved again if it fails)
# what a new snapshot runs once before it is kept (it must resume and run it)
SNAPSHOT_CHECK = "/trapline/tests/hello snapshot-check"
# Saved raspi0 guests resume only some of the time (6 of 9 here, docs/model.md:
# its system timer is not saved by QEMU 7.2); one that resumed once resumed in
# every later run. So a snapshot is saved up to this many times.
SAVE_ATTEMPTS = 4
TEXT_CHUNKS = 16  # images/init/init.c SNAP_CHUNKS: the payload's text; the program kind's program follows
DOES_NOT_FIT = ("the commands", "the program")  # write_payload: a run this snapshot cannot carry (not its fault)


@dataclass
class Snapshot:
    arch: str
    key: str
    path: Path                 # the entry's directory: state (QEMU's migration stream), meta.json
    meta: dict

    @property
    def state(self) -> Path:
        return self.path / "state"


def _cache_dir(name: str) -> Path:
    """cache/<name>, or, where the cache is not writable (the Docker image run
    as another uid), a directory of this user's in the temporary directory."""
    root = build.cache_root() / name
    try:
        root.mkdir(parents=True, exist_ok=True)
        if os.access(root, os.W_OK | os.X_OK):
            return root
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / f"trapline-{name.replace('/', '-')}-{os.getuid()}"


def snapshot_root() -> Path:
    """cache/snapshots (_cache_dir)."""
    return _cache_dir("snapshots")


def _split_plugin(qemu_extra: list[str] | None) -> tuple[list[str], list[str]]:
    """(the -plugin arguments, everything else): a plugin is no machine state, so
    a snapshot is saved without it and restored with whatever plugin a run has."""
    plugin, rest = [], []
    args = list(qemu_extra or [])
    while args:
        a = args.pop(0)
        if a == "-plugin" and args:
            plugin += [a, args.pop(0)]
        else:
            rest.append(a)
    return plugin, rest


def snapshot_key(image: Image, machine_extra: list[str]) -> tuple[str, dict]:
    """The key of the image's snapshot and what it was computed from: the QEMU
    command line the restored machine must be started with (boot.sh's own dry
    run, so boot.sh is the one definition of it; file paths replaced by their
    content hashes), QEMU's version, boot.sh itself, the entry's format and, for an arch
    saved with images/qemu-pagesize.c preloaded, that file and its page size."""
    env = _boot_env(image, SNAPSHOT_APPEND, machine_extra, TRAPLINE_DRY_RUN="1")
    cmd = ["bash", str(IMAGES / "boot.sh"), image.arch, str(image.kernel), str(image.initrd), "1"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    line = next((l.split("qemu:", 1)[1].strip() for l in out.stderr.splitlines() if l.startswith("boot.sh: qemu:")), "")
    if out.returncode != 0 or not line:
        raise RuntimeError(f"images/boot.sh's dry run failed: {tail(out.stderr, 5)}")
    files = {"kernel": (image.kernel, image.facts.get("LINUX_SHA256") or sha256_file(image.kernel)),
             "initrd": (image.initrd, image.facts.get("INITRD_SHA256") or sha256_file(image.initrd))}
    if image.dtb:
        files["dtb"] = (image.dtb, sha256_file(image.dtb))
    for name, (path, digest) in files.items():
        line = line.replace(str(path), f"<{name} sha256:{digest}>")
    inputs = {"format": SNAPSHOT_FORMAT, "arch": image.arch, "qemu_cmdline": line,
              "qemu": qemu_version(image.arch), "boot_sh_sha256": sha256_file(IMAGES / "boot.sh")}
    host_page = arch_table.get(image.arch).snapshot_host_page
    if host_page:  # QEMU runs with this preloaded to save and restore the machine (boot.sh)
        inputs["qemu_pagesize"] = {"host_page": host_page,
                                   "sha256": sha256_file(IMAGES / "qemu-pagesize.c")}
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    return key, inputs


def _entry(image: Image, key: str) -> Path:
    return snapshot_root() / f"{image.arch}-{key[:24]}"


def find_snapshot(image: Image, key: str) -> Snapshot | None:
    path = _entry(image, key)
    try:
        meta = json.loads((path / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    if meta.get("key") != key or not (path / "state").is_file():
        return None
    return Snapshot(image.arch, key, path, meta)


def drop_snapshot(snap: Snapshot) -> None:
    """Remove an entry (renamed away first, so no reader sees half of it)."""
    trash = snap.path.with_name(f".trash-{snap.path.name}-{os.getpid()}")
    try:
        os.rename(snap.path, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def make_snapshot(image: Image, machine_extra: list[str], key: str, inputs: dict, timeout: float,
                  log=None) -> tuple[Snapshot | None, str]:
    """Boot the image to its waiting init and save it (under a lock, into a
    temporary directory renamed into place); (the snapshot or None, a note)."""
    root = snapshot_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".lock-{image.arch}-{key[:24]}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        have = find_snapshot(image, key)
        if have:
            return have, "made by another run"
        why = ""
        for attempt in range(1, SAVE_ATTEMPTS + 1):
            snap, why, resumed = _save_once(image, machine_extra, key, inputs, timeout, root, log)
            if snap:
                return snap, f"saved in {snap.meta['saved_in_s']:.1f} s" + (f" (attempt {attempt})" if attempt > 1 else "")
            if not resumed:
                if log:
                    log(f"    snapshot: attempt {attempt}: {why.splitlines()[0]}")
                continue
            break
        return None, why


def _save_once(image: Image, machine_extra: list[str], key: str, inputs: dict, timeout: float, root: Path,
               log=None) -> tuple[Snapshot | None, str, bool]:
    """One boot and save; (the snapshot, a note, False if it was saved but did not resume)."""
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{image.arch}-", dir=root))
    try:
        if log:
            log(f"    booting the {image.arch} guest once to save a snapshot (cache {_entry(image, key).name})")
        t0 = time.monotonic()
        save = {"TRAPLINE_SNAPSHOT_SAVE": str(tmp / "state")}
        if image.facts.get("INIT_SNAPSHOT_SPIN"):  # saved where init first spins (boot.sh), not where `stop` lands
            save["TRAPLINE_SNAPSHOT_BREAK"] = image.facts["INIT_SNAPSHOT_SPIN"]
        env = _boot_env(image, SNAPSHOT_APPEND, machine_extra, **save)
        b = _run_boot_sh(image, env, timeout)
        m = re.search(r"^TLG ready magic=([0-9a-f]+) chunk=(\d+) chunks=(\d+)", b.console, re.M)
        if b.status != 0 or not m:
            return None, (f"saving the snapshot failed (boot.sh status {b.status}); console tail:\n"
                          f"{tail(b.console, 5)}\n{tail(b.stderr, 5)}"), True
        magic, chunk, chunks = bytes.fromhex(m.group(1)), int(m.group(2)), int(m.group(3))
        data = (tmp / "state").read_bytes()
        if "TRAPLINE_SNAPSHOT_BREAK" in save:
            data = _saved_as_running(data)
            if data is None:
                return None, "the machine saved at init's spin holds no 'debug' run state to mark running", True
            (tmp / "state").write_bytes(data)
        found: dict[int, list[int]] = {}
        for mt in re.finditer(re.escape(magic) + rb"[0-9a-f]{4}", data):  # one pass (4,112 chunks: program kind)
            found.setdefault(int(mt.group()[len(magic):], 16), []).append(mt.end())
        offsets = []
        for i in range(chunks):
            at = found.get(i, [])
            if len(at) != 1:
                return None, (f"the saved machine holds chunk {i}'s marker {'twice' if at else 'nowhere'}; "
                              "cannot write a payload into it"), True
            offsets.append(at[0])
        meta = {"key": key, "inputs": inputs, "chunk": chunk, "header": len(magic) + 4, "offsets": offsets,
                "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                "saved_in_s": round(time.monotonic() - t0, 3), "boot": b.facts,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        # it must resume before it is kept (some saved raspi0 guests never wake up:
        # SAVE_ATTEMPTS)
        check = Snapshot(image.arch, key, tmp, meta)
        b = _restore(image, check, [SNAPSHOT_CHECK], min(timeout, 120), None, machine_extra, tmp / "check",
                 init_timeout=CHECK_INIT_TIMEOUT_S)
        if isinstance(b, str):
            return None, f"the saved machine cannot be used: {b}", True
        if b.status != 0 or "hello from" not in b.console:
            return None, (f"the saved machine did not resume (boot.sh status {b.status}); console tail:\n"
                          f"{tail(b.console, 5)}\n{tail(b.stderr, 3)}"), False
        (tmp / "check").unlink(missing_ok=True)
        meta["checked_in_s"] = b.facts.get("host_wall_s")
        meta["mtime_ns"] = (tmp / "state").stat().st_mtime_ns  # hashed and checked as it is now
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        dest = _entry(image, key)
        if dest.exists():
            shutil.rmtree(dest)
        os.rename(tmp, dest)
        return Snapshot(image.arch, key, dest, meta), "", True
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)



def _saved_as_running(data: bytes) -> bytes | None:
    """A machine saved at a breakpoint (boot.sh TRAPLINE_SNAPSHOT_BREAK) is in QEMU's
    'debug' run state, which QEMU 7.2 writes into the stream (its "globalstate"
    section: a 4-byte length, then a 100-byte buffer) even with
    store-global-state=off, and a restore then fails ("invalid runstate transition:
    'inmigrate' -> 'debug'"). The state marked 'running' instead, in place (same
    length): the restored machine starts running, as one saved after `stop` does.
    None if the section is not as expected."""
    at = data.rfind(b"\x0bglobalstate")
    if at < 0:
        return None
    size = at + 12 + 8  # the idstr, then the instance and version ids
    buf = size + 4
    if data[size:buf] != (6).to_bytes(4, "big") or data[buf:buf + 6] != b"debug\0":
        return None
    return data[:size] + (8).to_bytes(4, "big") + b"running\0" + data[buf + 8:]


def write_payload(snap: Snapshot, payload: str, dest: Path, program: bytes | None = None) -> str | None:
    """Copy the snapshot's state to dest with the payload written after the
    chunk markers (the text in the first TEXT_CHUNKS; a program, the program
    kind's, in the chunks after them, its size in the text as tlg.program=);
    None, or why the snapshot cannot be used (its checksum
    differs: corrupt or changed; or the payload does not fit: DOES_NOT_FIT). The sha256 is
    checked when the file's size or modification time is not the one the entry
    recorded once it was saved and checked (meta "mtime_ns"; an entry without it
    is always checked): hashing the 37-82 MB state took 0.1-0.15 s of every run."""
    meta = snap.meta
    room = meta["chunk"] - meta["header"]
    if program is not None:
        payload += f" tlg.program={len(program)}"
    text = payload.encode() + b"\0"
    texts, progs = meta["offsets"][:TEXT_CHUNKS], meta["offsets"][TEXT_CHUNKS:]
    if len(text) > room * len(texts):
        return f"the commands ({len(text)} bytes) do not fit the snapshot's {room * len(texts)} bytes"
    if program is not None and len(program) > room * len(progs):
        return f"the program ({len(program)} bytes) does not fit the snapshot's {room * len(progs)} bytes"
    st = snap.state.stat()
    if st.st_size != meta["bytes"] or (st.st_mtime_ns != meta.get("mtime_ns")
                                       and sha256_file(snap.state) != meta["sha256"]):
        return f"its state file does not match its sha256 ({snap.state}: corrupt or changed)"
    shutil.copyfile(snap.state, dest)
    with open(dest, "r+b") as f:
        for i in range(0, len(text), room):
            f.seek(texts[i // room])
            f.write(text[i:i + room])
        for i in range(0, len(program or b""), room):
            f.seek(progs[i // room])
            f.write(program[i:i + room])
    return None


def _restore(image: Image, snap: Snapshot, commands: list[str], timeout: float, per_command_timeout: float | None,
             qemu_extra: list[str], state: Path, log=None, init_timeout: float = RESTORE_INIT_TIMEOUT_S,
             program: bytes | None = None) -> Boot | str:
    """One run from the snapshot (its state copied to state with the payload
    written in): the Boot, or why the snapshot cannot serve (a string)."""
    t0 = time.monotonic()
    why = write_payload(snap, run_line(commands, per_command_timeout or timeout), state, program)
    if why:
        return why
    prepared = time.monotonic() - t0
    env = _boot_env(image, SNAPSHOT_APPEND, qemu_extra, TRAPLINE_INCOMING=str(state))
    b = _run_boot_sh(image, env, timeout, log, init_timeout=init_timeout)
    b.facts["prepared_s"] = f"{prepared:.3f}"
    return b


def boot_from_snapshot(image: Image, commands: list[str], timeout: float, per_command_timeout: float | None,
                       log, qemu_extra: list[str] | None, program: Path | None = None) -> Boot:
    """The run's commands in a machine restored from the image's snapshot
    (made first if missing); a cold boot, with a note, where that cannot be.
    program: a user's program for the program kind (image: program_image's),
    written into the restored guest at PROGRAM_PATH, or, on a cold boot, carried
    there by a second initramfs segment (with_program)."""
    plugin, machine_extra = _split_plugin(qemu_extra)
    run_line(commands, per_command_timeout or timeout)  # a command init cannot take is a usage error, first
    notes: list[str] = []
    data = Path(program).read_bytes() if program is not None else None

    def cold(note: str) -> Boot:
        notes.append(note)
        if log:
            log(f"    snapshot: {note}; booting")
        with tempfile.TemporaryDirectory(prefix="trapline-boot-") as tmp:
            img = with_program(image, program, Path(tmp) / "initrd")[0] if program is not None else image
            b = boot(img, commands, timeout, per_command_timeout, log, qemu_extra)
        b.facts["snapshot"] = {"used": False, "notes": notes}
        return b

    if os.environ.get("TRAPLINE_SNAPSHOTS", "1") == "0":
        return cold("snapshots are off (TRAPLINE_SNAPSHOTS=0)")
    t0 = time.monotonic()
    try:
        key, inputs = snapshot_key(image, machine_extra)
    except (OSError, RuntimeError, subprocess.SubprocessError) as e:
        return cold(f"no snapshot key: {e}")
    key_s = time.monotonic() - t0
    snap, made = find_snapshot(image, key), None
    for attempt in range(2):
        if snap is None:
            try:
                snap, made = make_snapshot(image, machine_extra, key, inputs, timeout, log)
            except OSError as e:  # e.g. a cache the user cannot write (a container run as another uid)
                return cold(f"cannot save a snapshot in {snapshot_root()}: {e.strerror or e}")
            if snap is None:
                return cold(made)
        try:
            with tempfile.TemporaryDirectory(prefix="trapline-snapshot-") as tmp:
                b = _restore(image, snap, commands, timeout, per_command_timeout, machine_extra + plugin,
                             Path(tmp) / "state", log, program=data)
        except OSError as e:
            return cold(f"cannot use snapshot {snap.path.name}: {e.strerror or e}")
        if isinstance(b, str):
            if b.startswith(DOES_NOT_FIT):
                return cold(b)
            notes.append(f"snapshot {snap.path.name} dropped: {b}")
            if log:
                log(f"    snapshot: {notes[-1]}")
            drop_snapshot(snap)
            snap = None
            continue
        prepared = float(b.facts.pop("prepared_s"))
        b.facts["snapshot"] = {"used": True, "entry": snap.path.name, "made_now": made,
                               "key_s": round(key_s, 3), "payload_s": round(prepared, 3), "notes": notes}
        if reached_init(b):
            return b
        # QEMU did not start the saved machine (or it never took its commands)
        why = f"snapshot {snap.path.name} did not restore (boot.sh status {b.status}): {tail(b.stderr, 3)}"
        drop_snapshot(snap)
        return cold(why)
    return cold("; ".join(notes) or "no snapshot")


# ---------------------------------------------------------------------------
# A user's program in a guest (./run.sh simulate --guest, trapline/simulate.py).
# The program snapshot kind: the image's initramfs with a second segment holding
# an /init built -DTL_INIT_PROGRAM (program_image; Linux unpacks every archive of
# its initrd in turn, the later /init replacing the first), saved once per
# arch/image/machine where that init waits for its payload, as the lanes' are;
# each run writes the program into the restored guest through the same payload
# (the chunks after the text ones, write_payload) and runs it as a guest command
# through the same tlg.run channel as the lanes' kernels. The lanes' image and its
# /init stay as they are. A cold boot (no snapshot, or a program too large for
# the payload) carries the program as a second initramfs segment instead
# (with_program).

USER_DIR = "/trapline/user"
PROGRAM_PATH = f"{USER_DIR}/program"  # init.c TLG_PROGRAM_PATH


def program_image(image: Image, log=None) -> Image:
    """The image with init built -DTL_INIT_PROGRAM appended to its initramfs (made
    once into the cache, keyed by the initramfs, init.c, the compiler and flags;
    written to a temporary directory renamed into place); its facts name the new
    initramfs's sha256 (so its snapshot is its own) and, where init has it, the
    new init's tlg_snapshot_spin."""
    import dataclasses
    a = arch_table.get(image.arch)
    src = IMAGES / "init" / "init.c"
    cc = [a.cc, *a.cflags.split(), "-O2", "-static", "-Wall", "-Wextra", f"-ffile-prefix-map={IMAGES}=images",
          "-DTL_INIT_PROGRAM"]
    base = image.facts.get("INITRD_SHA256") or sha256_file(image.initrd)
    inputs = {"initrd": base, "init.c": sha256_file(src), "cc": cc[1:], "gcc": tool_version(a.cc)}
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    root = _cache_dir("images")
    dest = root / f"program-{image.arch}-{key[:24]}"
    if not (dest / "meta.json").is_file():
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-program-{image.arch}-", dir=root))
        try:
            if log:
                log(f"    building the {image.arch} guest's program init ({dest.name})")
            status, _, err = run_command(cc + ["-o", str(tmp / "init"), str(src)], 300)
            if status != 0:
                raise RuntimeError(f"compiling init -DTL_INIT_PROGRAM failed: {tail(err, 10)}")
            first = image.initrd.read_bytes()
            seg = _cpio_entry("init", 0o100755, (tmp / "init").read_bytes(), 1) + _cpio_entry("TRAILER!!!", 0, b"", 0)
            data = first + b"\0" * (-len(first) % 4) + seg + b"\0" * (-len(seg) % 512)
            (tmp / "initrd").write_bytes(data)
            nm = subprocess.run([f"{a.cross}nm", str(tmp / "init")], capture_output=True, text=True, timeout=60).stdout
            spin = next((f"0x{l.split()[0].lstrip('0') or '0'}" for l in nm.splitlines()
                         if l.endswith(" T tlg_snapshot_spin")), None)
            meta = {"inputs": inputs, "initrd_sha256": hashlib.sha256(data).hexdigest(), "init_snapshot_spin": spin}
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
            try:
                os.rename(tmp, dest)
            except OSError:  # another run made it meanwhile
                if not (dest / "meta.json").is_file():
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    meta = json.loads((dest / "meta.json").read_text())
    facts = {**image.facts, "INITRD_SHA256": meta["initrd_sha256"]}
    facts.pop("INIT_SNAPSHOT_SPIN", None)
    if meta["init_snapshot_spin"]:
        facts["INIT_SNAPSHOT_SPIN"] = meta["init_snapshot_spin"]
    return dataclasses.replace(image, initrd=dest / "initrd", facts=facts)


def _cpio_entry(name: str, mode: int, data: bytes, ino: int) -> bytes:
    nb = name.encode() + b"\0"
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0]
    head = b"070701" + b"".join(b"%08X" % f for f in fields) + nb
    head += b"\0" * (-len(head) % 4)
    return head + data + b"\0" * (-len(data) % 4)


def program_cpio(path: Path, name: str) -> bytes:
    """A newc archive holding the program at USER_DIR/name (mode 0755)."""
    data = Path(path).read_bytes()
    out = _cpio_entry(USER_DIR.lstrip("/"), 0o040755, b"", 1)
    out += _cpio_entry(f"{USER_DIR.lstrip('/')}/{name}", 0o100755, data, 2)
    out += _cpio_entry("TRAILER!!!", 0, b"", 0)
    return out + b"\0" * (-len(out) % 512)


def with_program(image: Image, program: Path, dest: Path) -> tuple[Image, str]:
    """The image with the program appended to its initramfs as a second segment (written
    to dest), and the program's path in the guest."""
    import dataclasses
    name = "program"
    base = image.initrd.read_bytes()
    dest.write_bytes(base + b"\0" * (-len(base) % 4) + program_cpio(program, name))
    return dataclasses.replace(image, initrd=dest), f"{USER_DIR}/{name}"


def program_command(guest_path: str, args: list[str]) -> str:
    """The guest command line of a program and its arguments (init splits on blanks)."""
    for a in args:
        if not a or any(c in a for c in ' \t\n;"'):
            raise UsageError(f"simulate --guest: argument '{a}' cannot reach the guest's init "
                             "(no blanks, ';' or '\"', not empty)")
    return " ".join([guest_path, *args])


def program_result(stats: dict, b: Boot, timeout: float) -> "simstats.Run":
    """A guest run's stats with the program's exit status and output from the console."""
    from trapline import simstats
    got = next((c for c in b.commands if c.n == 1), None)
    err = None
    if got is None or got.status == "missing":
        err = describe_failure(b, timeout) or f"the guest never ran the program; console tail:\n{tail(b.console)}"
    elif got.status == "timeout":
        err = f"the program did not end within {timeout:g} s and was killed; console tail:\n{tail(b.console)}"
    elif got.status.startswith("sig"):
        err = f"the program was killed by signal {got.status[3:]}; its output:\n{tail(got.output)}"
    if got is not None and got.status.isdigit():
        stats["exit_status"] = int(got.status)
    if got is not None and got.wall_s is not None:
        stats.setdefault("guest_emulation_seconds", {"wall": got.wall_s, "user": got.user_s, "sys": got.sys_s})
    stats["boot"] = b.facts
    return simstats.Run(stats, got.output if got else "", "", err, b.console)
