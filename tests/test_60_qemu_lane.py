"""The guest lane: real Linux kernels booted under QEMU, traps and fixups
counted exactly, NUMA placement checked, hung guests killed, images
reproducible. The experiments run once, in the quick_all fixture."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from trapline import build, guest, images

QEMU_IDS = ["sparc-misalign-trap", "armv6-unaligned", "sparc-strong-prefetch", "numa-first-touch", "sparc-spill-fill"]


def _entry(quick_all, eid):
    for e in quick_all["summary"]["experiments"]:
        if e["id"] == eid and e["platform"] == "qemu":
            return e
    raise AssertionError(f"no qemu entry for {eid}")


def _full_entry(quick_all, eid):
    return json.loads((quick_all["final"] / "entries" / f"{eid}.qemu.json").read_text())


def _figure(entry, prefix):
    return next(f["value"] for f in entry["figures"] if f["name"].startswith(prefix))


def test_every_guest_experiment_has_a_qemu_entry(quick_all):
    for eid in QEMU_IDS:
        e = _entry(quick_all, eid)
        assert e["status"] != "failed", (eid, e["note"])


def test_armv6_kernel_fixes_up_every_unaligned_ldrd_and_ldm_exactly(quick_all):
    e = _full_entry(quick_all, "armv6-unaligned")
    assert e["status"] == "reproduced" and e["reproduced"] == 1.0
    assert all(c["ok"] for c in e["checks"]) and len(e["checks"]) >= 8, e["checks"]
    assert _figure(e, "kernel fixups (Multi) per unaligned LDM") == 1.0
    assert _figure(e, "kernel fixups per unaligned 32-bit LDR") == 0.0
    # the counts are the guest kernel's, not derived: /proc/cpu/alignment moved
    raw = (quick_all["final"] / "raw" / "armv6-unaligned.qemu.log").read_text()
    assert "name=alignment_fixups_dword value=" in raw and "TLG done" in raw


def test_sparc_misaligned_loads_trap_once_each_and_sum_correctly(quick_all):
    e = _full_entry(quick_all, "sparc-misalign-trap")
    assert e["status"] == "reproduced" and e["reproduced"] == 1.0
    assert all(c["ok"] for c in e["checks"]), e["checks"]
    raw = (quick_all["final"] / "raw" / "sparc-misalign-trap.qemu.log").read_text()
    assert "kernel=6.1" in raw and "machine=sparc64" in raw


def test_numa_first_touch_places_pages_and_shows_both_modes(quick_all):
    e = _full_entry(quick_all, "numa-first-touch")
    assert e["status"] == "reproduced", e["note"]
    assert all(c["ok"] for c in e["checks"]), e["checks"]
    share = _figure(e, "share of bimodal trials that ended mostly remote")
    assert 0 < share < 1, "the bimodal case needs both local and remote outcomes"


def test_spill_fill_runs_and_prefetch_is_reported_as_model_work(quick_all):
    e = _entry(quick_all, "sparc-spill-fill")
    assert e["status"] == "reproduced" and 0.99 <= e["reproduced"] <= 1
    assert "derived" in e["metric"]
    p = _entry(quick_all, "sparc-strong-prefetch")
    assert p["status"] == "not-applicable" and "no-op" in p["note"] and p["reproduced"] > 0


def test_qemu_wall_clock_is_never_shown_as_a_prediction(quick_all):
    md = (quick_all["final"] / "report.md").read_text()
    assert "emulation time, not a prediction" in md
    assert not any(p.name.endswith(".qemu.png") for p in (quick_all["final"] / "plots").iterdir())


def test_manifest_records_guest_images_and_qemu(quick_all):
    m = json.loads((quick_all["final"] / "manifest.json").read_text())
    q = m["platforms"]["qemu"]
    for arch in ("sparc64", "armv6", "x86_64"):
        assert len(q[arch]["linux_sha256"]) == 64 and len(q[arch]["initrd_sha256"]) == 64
        assert "QEMU emulator version" in q[arch]["qemu"]
    assert m["binaries_sha256"]["armv6-unaligned.qemu"]["guest/linux"] == q["armv6"]["linux_sha256"]


@pytest.fixture(scope="module")
def armv6_image():
    return images.build_image("armv6", build.build("armv6"))


def test_hung_guest_is_killed_at_its_timeout_with_the_console_tail(armv6_image):
    hang = "/trapline/bin/strlen-loop/strlen-loop variant=inloop loops=1000000000000"
    b = guest.boot(armv6_image, [hang], timeout=12)
    assert b.status == 124
    msg = guest.describe_failure(b, 12)
    assert "did not finish within 12 s" in msg and "console tail" in msg
    assert "TLG cmd 1 /trapline/bin/strlen-loop/strlen-loop" in msg


def test_failing_guest_command_is_reported(armv6_image):
    b = guest.boot(armv6_image, ["/trapline/bin/strlen-loop/strlen-loop bogus_key=1"], timeout=60)
    assert b.status == 0 and b.commands[0].status == "2"
    assert "unknown key 'bogus_key'" in b.commands[0].output


def test_initramfs_is_reproducible(tmp_path, armv6_image):
    """Same inputs, a fresh cache: the initramfs is rebuilt to the same bytes."""
    cache = tmp_path / "cache"
    (cache / "images").mkdir(parents=True)
    src = build.cache_root() / "images"
    for p in src.iterdir():
        if p.name.startswith(".") or "-initramfs-" in p.name:
            continue
        os.symlink(p, cache / "images" / p.name)
    out = subprocess.run(["bash", str(images.IMAGES / "build.sh"), "armv6", "", str(build.build("armv6"))],
                         env=dict(os.environ, TRAPLINE_CACHE=str(cache)), capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "initramfs built" in out.stderr
    facts = dict(l.split("=", 1) for l in out.stdout.splitlines() if "=" in l)
    assert facts["INITRD_SHA256"] == armv6_image.facts["INITRD_SHA256"]
    assert facts["LINUX_SHA256"] == armv6_image.facts["LINUX_SHA256"]


@pytest.mark.skipif(os.environ.get("TRAPLINE_SKIP_KERNEL_REPRO") == "1", reason="TRAPLINE_SKIP_KERNEL_REPRO=1")
def test_linux_kernel_build_is_reproducible(armv6_image):
    """images/build.sh builds the kernel a second time in another directory and
    compares the sha256 of the image and of vmlinux (TRAPLINE_REPRO_CHECK=1)."""
    out = subprocess.run(["bash", str(images.IMAGES / "build.sh"), "armv6"],
                         env=dict(os.environ, TRAPLINE_REPRO_CHECK="1", TRAPLINE_CACHE=str(build.cache_root())),
                         capture_output=True, text=True, timeout=3000)
    assert out.returncode == 0, out.stderr[-3000:]
    manifest = (Path(armv6_image.facts["LINUX_CACHE"]) / "manifest.txt").read_text()
    facts = dict(l.split("=", 1) for l in manifest.splitlines() if "=" in l)
    assert facts["repro_check"] == "identical", manifest
    assert facts["repro_image_sha256_first"] == facts["repro_image_sha256_second"] == facts["kernel_sha256"]
    assert facts["repro_vmlinux_sha256_first"] == facts["repro_vmlinux_sha256_second"]
