"""Errors the user can fix, and the exit status and line the command line gives each error."""

from __future__ import annotations

import re

# A value quoted in a message is shortened past this many characters (a 50 MB field was
# echoed whole); what is kept names it: its start, its end and its length. A line that
# is still longer (a long value with blanks in it) keeps its start and its end.
LONGEST_WORD = 200
LONGEST_LINE = 3000
_LONG_WORD = re.compile(r"\S{%d,}" % (LONGEST_WORD + 1))
_LINE_BREAKS = re.compile(r"[\r\n]+")


def shortened(text: str) -> str:
    """`text` as one line: each run of line breaks becomes one space, and a
    run of more than LONGEST_WORD non-blank characters keeps its first 100 and last 40, and
    a line still longer than LONGEST_LINE its first 2,000 and last 600 characters."""
    text = _LONG_WORD.sub(lambda m: f"{m[0][:100]}...[{len(m[0]):,} characters]...{m[0][-40:]}",
                          _LINE_BREAKS.sub(" ", text))
    if len(text) > LONGEST_LINE:
        text = f"{text[:2000]} ...[{len(text) - 2600:,} characters]... {text[-600:]}"
    return text


class UsageError(Exception):
    """Bad input: an unknown id, platform, key or value. Exit status 2. Its message is one
    line, whatever values it quotes (`shortened`)."""

    def __init__(self, message: object = "", *args):
        super().__init__(shortened(str(message)), *args)


class ExperimentError(UsageError):
    """An experiment file that does not validate; names the file and field."""


class RunFailed(Exception):
    """A kernel or guest failed at run time (crash, timeout, bad output). Exit status 1."""


class NoSpace(RunFailed):
    """A full file system (ENOSPC, EDQUOT) where a run writes, or too little space for it
    before it starts: one line naming the directory and the space needed or left. Exit 1;
    the run claims nothing and the same command resumes it (trapline/results.py)."""


# What the command line does with each error, in one place (./run.sh and the
# `python -m trapline...` tools): the class, the word before its one line on stderr
# (None: nothing printed), the exit status. The first class the error is an instance of wins.
EXIT_STATUSES: tuple[tuple[type[BaseException], str | None, int], ...] = (
    (UsageError, "error", 2),
    (RunFailed, "failed", 1),
    (KeyboardInterrupt, None, 130),  # Ctrl-C, or SIGTERM turned into it: children killed, the run resumable
)


def exit_status(fn) -> int:
    """Run fn(): its status (None counts as 0), or for an error in EXIT_STATUSES its line
    `trapline: WORD: message` on stderr and its status."""
    import sys
    try:
        return fn() or 0
    except tuple(cls for cls, _, _ in EXIT_STATUSES) as e:
        word, status = next((w, s) for cls, w, s in EXIT_STATUSES if isinstance(e, cls))
        if word:
            print(f"trapline: {word}: {e}", file=sys.stderr)
        return status
