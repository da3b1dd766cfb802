"""The one user-facing error type, and the exit codes every command shares (README.md and docs/usage.md, "Exit codes")."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3
EXIT_INTERRUPTED = 130


class UserError(Exception):
    """Bad input or configuration: printed as one line naming where, exit code 2, no traceback.

    ``where`` is a file and line (``profile.yaml:12``), a host and field (``node3: launch.rank``),
    or empty.
    """

    exit_code = EXIT_USAGE

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message
