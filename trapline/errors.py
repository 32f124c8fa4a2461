"""Errors the user can fix. The CLI prints them as one line and exits 2."""


class UsageError(Exception):
    """Bad input: an unknown id, platform, key or value. Exit status 2."""


class ExperimentError(UsageError):
    """An experiment file that does not validate; names the file and field."""


class RunFailed(Exception):
    """A kernel or guest failed at run time (crash, timeout, bad output)."""
