"""The model platform's plugin: built by model/build.sh (cached by content hash
in the cache, trapline/paths.py), once per run context."""

from __future__ import annotations

import os
from pathlib import Path

from trapline.errors import RunFailed
from trapline.paths import MODEL, cache_root
from trapline.proc import run_command, tail

BUILD_SH = MODEL / "build.sh"
TOOL = "model-plugin"  # its key among the run context's tools (ctx.tool)


def plugin_path(log=None) -> Path:
    """Build (or find in the cache) the plugin; model/build.sh prints its path."""
    env = dict(os.environ, TRAPLINE_CACHE=str(cache_root()))
    status, out, err = run_command(["sh", str(BUILD_SH)], 1800, env=env)
    if status != 0 or not out.strip():
        raise RunFailed(f"building the timing-model plugin failed (status {status}):\n{tail(err, 20)}")
    return Path(out.strip().splitlines()[-1])


def plugin(ctx) -> Path:
    """The plugin for the run context ctx: built (or found in the cache) once per context."""
    return ctx.tool(TOOL, lambda: plugin_path(ctx.log))
