"""Errors the user can fix. The CLI prints them as one line and exits 2."""

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
