"""Every answer under /api/ is JSON, whatever DEBUG says and wherever the request stops.

Django answers some requests before any API view runs, in HTML: a path that resolves to
nothing (under DEBUG the technical 404 page; handler404 only runs when DEBUG is off), an
uncaught exception under DEBUG (the debug traceback page), and a path missing its trailing
slash (CommonMiddleware's APPEND_SLASH redirects it, dropping a POST body, and under DEBUG
raises on a POST, a 500). An API client cannot read any of these, so under /api/:

- a path that would resolve with a trailing slash is a JSON 404 that names the right path;
- a NUL in a query parameter is a JSON 400 naming it (PostgreSQL cannot hold it in text, and
  Django's forms refuse it in some filters and not others: one rule, documented in the schema),
  and so is a parameter given twice that takes one value (Django would silently use the last);
- any other error answer that is not JSON already becomes ``{"message": ...}`` with its status.

Sits above CommonMiddleware, so APPEND_SLASH never sees an API path that needs the slash.
"""

import logging

from django.http import JsonResponse
from django.urls import Resolver404, get_resolver

logger = logging.getLogger(__name__)

API_PREFIX = "/api/"

_MESSAGES = {
    404: "Not found: {path}",
    405: "Method {method} is not allowed on {path}.",
    500: "Internal server error; it has been logged.",
}


def _resolves(path_info: str) -> bool:
    try:
        get_resolver().resolve(path_info)
    except Resolver404:
        return False
    return True


def _query_refusal(request) -> JsonResponse | None:
    """A NUL in a query parameter, or a parameter given twice that takes one value (Django would
    silently use the last), as a 400 naming it."""
    repeated = {name for name, values in request.GET.lists() if len(values) > 1}
    if repeated:
        repeated -= _list_parameters(request.path_info)
    for name, values in request.GET.lists():
        if "\x00" in name or any("\x00" in value for value in values):
            problem = "May not contain NUL (%00)."
        elif name in repeated:
            problem = "Give it once: it takes one value."
        else:
            continue
        shown = name.replace("\x00", "\\x00")[:100]
        return JsonResponse({"message": f"Invalid input: {shown}: {problem}", "errors": {shown: [problem]}}, status=400)
    return None


def _list_parameters(path_info: str) -> set[str]:
    """The query parameters of the view at ``path_info`` that take a list (?status=a&status=b)."""
    from django_filters import MultipleChoiceFilter

    try:
        view_class = getattr(get_resolver().resolve(path_info).func, "view_class", None)
    except Resolver404:
        return set()
    filterset = getattr(view_class, "filterset_class", None)
    if filterset is None:
        return set()
    return {name for name, item in filterset.base_filters.items() if isinstance(item, MultipleChoiceFilter)}


def slash_hint(request) -> str | None:
    """The path with a trailing slash, when only that one resolves."""
    path_info = request.path_info
    if path_info.endswith("/") or _resolves(path_info) or not _resolves(f"{path_info}/"):
        return None
    return f"{request.path}/"


class ApiJsonErrorsMiddleware:
    # Sync only: config/speed/asgi_handler.py builds the whole chain in sync mode, in one thread hop.
    sync_capable = True
    async_capable = False

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.path.startswith(API_PREFIX):
            return self.get_response(request)
        refused = _query_refusal(request)
        if refused is not None:
            return refused
        hint = slash_hint(request)
        if hint is not None:
            message = f"Not found: {request.path[:300]}. Did you mean {hint[:301]}? API paths end with a slash."
            return JsonResponse({"message": message}, status=404)
        response = self.get_response(request)
        if response.status_code >= 400 and not response.get("Content-Type", "").startswith("application/json"):
            return self._as_json(request, response)
        return response

    @staticmethod
    def _as_json(request, response) -> JsonResponse:
        status = response.status_code
        template = _MESSAGES.get(status, "Request refused ({status}).")
        message = template.format(path=request.path[:300], method=request.method[:20], status=status)
        converted = JsonResponse({"message": message}, status=status)
        for header in ("Allow", "Retry-After", "WWW-Authenticate"):
            if header in response:
                converted[header] = response[header]
        return converted
