"""The model platform's plugin: built by model/build.sh (cached by content hash
in the cache, trapline/paths.py), once per run context."""

from __future__ import annotations

import os
from pathlib import Path

from trapline.errors import RunFailed
from trapline.paths import MODEL, cache_root
from trapline.machine.options import PLUGIN_DIR
from trapline.proc import run_command, tail
from trapline.results import cache_write

BUILD_SH = MODEL / "build.sh"
TOOL = "model-plugin"  # its key among the run context's tools (ctx.tool)


def plugin_path(log=None) -> Path:
    """Build (or find in the cache) the plugin; model/build.sh prints its path. The path it
    printed last for the same plugin sources is used without asking it again while dpkg's
    database (the compiler, the installed QEMU whose header build.sh keys) has not changed
    and CC is unset: build.sh asks dpkg-query, the header and the compiler, 20-150 ms of
    every `./run.sh simulate` (docs/performance.md); its key stays the authority."""
    import hashlib
    memo = cache_root() / "model" / ".last-plugin"
    sources = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(PLUGIN_DIR.iterdir()) if p.is_file()))
    try:
        if "CC" not in os.environ and memo.stat().st_mtime_ns > os.stat("/var/lib/dpkg/status").st_mtime_ns:
            digest, so = memo.read_text().split(" ", 1)
            if digest == sources.hexdigest() and Path(so).is_file():
                return Path(so)
    except (OSError, ValueError):
        pass
    env = dict(os.environ, TRAPLINE_CACHE=str(cache_root()))
    status, out, err = run_command(["sh", str(BUILD_SH)], 1800, env=env)
    if status != 0 or not out.strip():
        raise RunFailed(f"building the timing-model plugin failed (status {status}):\n{tail(err, 20)}")
    so = out.strip().splitlines()[-1]
    cache_write(memo, f"{sources.hexdigest()} {so}")
    return Path(so)


def plugin(ctx) -> Path:
    """The plugin for the run context ctx: built (or found in the cache) once per context."""
    return ctx.tool(TOOL, lambda: plugin_path(ctx.log))
