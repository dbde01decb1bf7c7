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


class CredentialsMasked(logging.Filter):
    """Masks credentials in a log line's text and arguments (``?api_key=...``, ``token=...``,
    ``password=...``, ``user:pass@`` in URLs, any key shape config/redaction.py knows), so a key
    that a client put in a URL never reaches the access log. Such a key is not accepted either:
    only the Authorization header authenticates (sessions_app/api/authentication.py)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from config.redaction import redact_text  # the app registry is not ready when LOGGING is read

        if isinstance(record.msg, str):
            record.msg = redact_text(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact_text(arg) if isinstance(arg, str) else arg for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: redact_text(v) if isinstance(v, str) else v for key, v in record.args.items()}
        return True


# The loggers that write request lines. The servers configure their own access loggers (not
# settings.LOGGING, which would replace their handlers and format), so the filter is added to them
# in LedgerConfig.ready(); every line that goes through LOGGING's console handler gets it there too.
REQUEST_LOGGERS = (
    "uvicorn.access",
    "uvicorn.error",
    "gunicorn.access",
    "gunicorn.error",
    "django.server",
    "django.request",
)


def credentials_masking_install() -> None:
    for name in REQUEST_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, CredentialsMasked) for existing in logger.filters):
            logger.addFilter(CredentialsMasked())


class ClientErrorsWithoutTraceback(logging.Filter):
    """Keeps the one line Django logs for a 4xx (``Forbidden (Permission denied): /path``) and drops
    the traceback it attaches when a view raised PermissionDenied, Http404 or SuspiciousOperation:
    a refusal is an answer, not a crash, and two tracebacks per 403 buried the console. 5xx keep theirs."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
