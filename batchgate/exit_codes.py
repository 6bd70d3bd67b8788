"""Exit codes shared by every `batchgate` verb, so scripts can branch on what went wrong.

| code | meaning |
|---|---|
| 0 | success |
| 1 | anything else (server error, unreachable server, batch ended failed/expired/cancelled) |
| 2 | invalid input: bad flags or files, HTTP 400/413/422, no valid record in a batch |
| 3 | not found (HTTP 404, unknown key) |
| 4 | conflict: wrong state (HTTP 409, key already revoked) |
"""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0
    OTHER = 1
    INVALID = 2
    NOT_FOUND = 3
    CONFLICT = 4

    @classmethod
    def for_http_status(cls, status: int) -> ExitCode:
        if status < 400:
            return cls.OK
        if status in (400, 413, 422):
            return cls.INVALID
        if status == 404:
            return cls.NOT_FOUND
        if status == 409:
            return cls.CONFLICT
        return cls.OTHER


class CommandError(Exception):
    """A verb failed in a way the user should read: printed as `error: …`, exits with `code`."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
