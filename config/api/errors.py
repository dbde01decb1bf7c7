"""Error types. Kept free of rest_framework.views, which the parsers must not import."""

from rest_framework import exceptions, status

# The ``code`` of a 409 body when the agent's claim (a task, a worktree lease) was taken back
# because it sent no sign of life in time: its client tells it to claim again.
LEASE_LOST = "lease_lost"


class DomainError(Exception):
    """A rule of the domain refused the request.

    ``code`` is one of: ``invalid`` (400), ``forbidden`` (403), ``not_found`` (404),
    ``conflict`` (409), ``too_large`` (413).
    """

    STATUS = {"invalid": 400, "forbidden": 403, "not_found": 404, "conflict": 409, "too_large": 413}

    def __init__(self, message: str, *, code: str = "invalid", extra: dict | None = None):
        if code not in self.STATUS:
            raise ValueError(f"unknown DomainError code {code!r}")
        super().__init__(message)
        self.message = message
        self.code = code
        self.extra = extra or {}

    @property
    def status_code(self) -> int:
        return self.STATUS[self.code]


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body is too large."
    default_code = "too_large"
