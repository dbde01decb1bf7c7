"""Errors the client raises: one type per HTTP outcome, each with the status and the server's message."""

from __future__ import annotations

from typing import Any


class SwitchyardError(Exception):
    """Anything that went wrong talking to Switchyard."""

    status: int | None = None
    exit_code = 1

    def __init__(self, message: str, *, status: int | None = None, body: Any = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.body = body

    @property
    def field_errors(self) -> dict:
        if isinstance(self.body, dict) and isinstance(self.body.get("errors"), dict):
            return self.body["errors"]
        return {}

    def __str__(self) -> str:
        prefix = f"{self.status}: " if self.status else ""
        details = "; ".join(
            f"{name}: {' '.join(map(str, msgs)) if isinstance(msgs, list) else msgs}"
            for name, msgs in self.field_errors.items()
        )
        return prefix + self.message + (f" ({details})" if details else "")


class ConfigurationError(SwitchyardError):
    """No URL or key: nothing was sent."""

    exit_code = 3


class ConnectionFailed(SwitchyardError):
    """The server did not answer (refused, timed out, DNS): after the retries."""

    exit_code = 11


class BadRequest(SwitchyardError):
    status = 400
    exit_code = 4


class Unauthorized(SwitchyardError):
    status = 401
    exit_code = 5


class Forbidden(SwitchyardError):
    status = 403
    exit_code = 6


class NotFound(SwitchyardError):
    status = 404
    exit_code = 7


class Conflict(SwitchyardError):
    status = 409
    exit_code = 8


class LeaseLost(Conflict):
    """A 409 with ``code: lease_lost``: Switchyard took the claim back because it heard nothing from
    this agent in time (the reaper, or a worktree lease that ran out). Nothing was changed; claim
    the task or worktree again to go on."""

    CODE = "lease_lost"

    @classmethod
    def from_body(cls, body: dict) -> LeaseLost:
        when = body.get("lost_at") or "an unknown time"
        if body.get("task") is not None:
            what, why = f"task {body['task']}", f"no heartbeat for {body.get('ttl_seconds', '?')} s"
            again = f"claim it again (switchyard task claim {body['task']})"
        elif body.get("run") is not None:
            # A runner's run handed back or to another runner: its attempt no longer holds it.
            message = body.get("message") or f"run {body['run']} is at attempt {body.get('attempt', '?')}"
            return cls(f"run {body['run']} is no longer held by this runner: {message}", status=409, body=body)
        elif body.get("worktree") is not None:
            what = f"worktree {body['worktree']}"
            why = body.get("reason") or "its lease ran out without a heartbeat"
            again = f"claim it again (switchyard worktree claim {body['worktree']})"
        else:
            what, why, again = "a claim", "no heartbeat in time", "claim it again"
        if when == "an unknown time" and body.get("lease_expires_at"):
            when = body["lease_expires_at"]
        return cls(f"your claim on {what} was lost at {when} because {why}; {again}", status=409, body=body)


class TooLarge(SwitchyardError):
    status = 413
    exit_code = 9


class Throttled(SwitchyardError):
    status = 429
    exit_code = 10


class ServerError(SwitchyardError):
    """A 5xx after the retries."""

    exit_code = 12


_BY_STATUS: dict[int, type[SwitchyardError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    429: Throttled,
}


def error_for(status: int, body: Any) -> SwitchyardError:
    """The error for a non-2xx answer, worded with the server's own message."""
    message = ""
    if isinstance(body, dict):
        message = str(body.get("message") or body.get("detail") or "")
    elif isinstance(body, str):
        message = body[:300]
    if status == 409 and isinstance(body, dict) and body.get("code") == LeaseLost.CODE:
        return LeaseLost.from_body(body)
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else SwitchyardError)
    return cls(message or f"HTTP {status}", status=status, body=body)
