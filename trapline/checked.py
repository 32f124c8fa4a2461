"""Checks remembered by content hash: a description that passed its checks is not
read and checked again while nothing it was checked with has changed, as a build is
not redone (docs/performance.md: the schema validation and the kernels' `make list`
were most of the 0.4 s every command paid before it did anything).

What a check reads is the key: the file's bytes, what it was checked with (the
--set values, the schema as loaded) and every file the checks' code and data come
from: trapline/ (its Python and schemas), gem5_configs/, the model's option table,
the kernels directory (every file but build/) and shared/claims.md. A pass is
remembered as the description's data as it was loaded (JSON, in
<cache>/checked/<sha256>), so that a later call needs neither the YAML parser nor
the checks; a failure is never remembered, so its message is always today's.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from trapline.paths import ROOT, shared
_CODE = (str(ROOT / "trapline"), str(ROOT / "gem5_configs"), str(ROOT / "model" / "plugin" / "options.def"),
         str(shared("claims.md")))
_SKIP_DIRS = ("build", "__pycache__")


def _signature(tops: tuple[str, ...]) -> tuple:
    """(path, size, mtime) of every file under tops: cheap (stat only), and different as
    soon as one is added, removed or written."""
    sig = []
    for top in tops:
        if os.path.isfile(top):
            st = os.stat(top)
            sig.append((top, st.st_size, st.st_mtime_ns))
            continue
        for d, dirs, files in os.walk(top):
            dirs[:] = sorted(x for x in dirs if x not in _SKIP_DIRS and not x.startswith("."))
            for f in sorted(files):
                if f.endswith((".pyc", ".png", ".so", ".o")):
                    continue
                p = os.path.join(d, f)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                sig.append((p, st.st_size, st.st_mtime_ns))
    return tuple(sig)


@lru_cache(maxsize=8)
def _hash(sig: tuple) -> bytes:
    """The sha256 of the files' contents (hashed again whenever the signature changes: a
    process that edits them, as tests do, never meets a stale hash)."""
    h = hashlib.sha256()
    for name, _size, _mtime in sig:
        try:
            with open(name, "rb") as f:
                data = f.read()
        except OSError:
            continue
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.digest()


def _stamp(kind: str, parts: tuple) -> Path:
    from trapline.paths import cache_root, kernels_dir
    h = hashlib.sha256(_hash(_signature((*_CODE, str(kernels_dir())))))
    for part in (kind, *parts):
        b = part if isinstance(part, bytes) else str(part).encode()
        h.update(len(b).to_bytes(8, "little") + b)
    return cache_root() / "checked" / h.hexdigest()


def recall(kind: str, *parts) -> Any | None:
    """The data of a description of `kind` with these parts (its bytes, and what else decides
    its checks) as loaded when it passed them with today's code and data; None otherwise."""
    try:
        return json.loads(_stamp(kind, parts).read_text())
    except (OSError, ValueError):
        return None


def remember(kind: str, *parts, data: Any) -> None:
    """Note that it passed, with its data (best effort: a cache that cannot be written, or
    data that JSON does not give back as it was, changes nothing but the speed)."""
    try:
        text = json.dumps(data)  # (in the order it was written: the order of lanes and runs matters)
        if json.loads(text) != data:
            return
        p = _stamp(kind, parts)
    except (OSError, TypeError, ValueError):
        return
    from trapline.results import cache_write  # (only when a check passed afresh: not every command pays for it)
    cache_write(p, text)
