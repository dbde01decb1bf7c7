"""Error pages for requests that never reach a view. Under /api/ they answer JSON, like
every other API error; elsewhere Django's own pages stay."""

from django.http import JsonResponse
from django.views import defaults


def _is_api(request) -> bool:
    return request.path.startswith("/api/")


def not_found(request, exception=None):
    if _is_api(request):
        return JsonResponse({"message": f"Not found: {request.path[:300]}"}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request):
    if _is_api(request):
        return JsonResponse({"message": "Internal server error; it has been logged."}, status=500)
    return defaults.server_error(request)
