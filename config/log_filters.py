"""Logging filters named in settings.LOGGING."""

import logging


class ContentionRefusals(logging.Filter):
    """Drops django.request's warning for a claim refused because another agent holds the thing
    (409 on a ``.../claim/`` URL). Under contention that is the expected answer, hundreds a second
    when agents race for a few worktrees, and a warning line for each would bury the ones a
    person should read. Every other 4xx is still logged, and the refusal is in the agent's answer."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) != 409:
            return True
        return not getattr(getattr(record, "request", None), "path", "").endswith("/claim/")
