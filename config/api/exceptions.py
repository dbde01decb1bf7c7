"""Every API error becomes JSON: {"message": ..., "errors": {field: [...]}}."""

import logging

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import DataError
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler

from config.api.errors import DomainError, PayloadTooLarge

logger = logging.getLogger(__name__)


def first_message(detail) -> str:
    if isinstance(detail, list) and detail:
        return first_message(detail[0])
    if isinstance(detail, dict) and detail:
        key, value = next(iter(detail.items()))
        inner = first_message(value)
        return inner if key in ("non_field_errors", "detail") else f"{key}: {inner}"
    return str(detail)


def api_exception_handler(exc, context):
    if isinstance(exc, DomainError):
        body = {"message": exc.message, **exc.extra}
        return Response(body, status=exc.status_code)
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge()
    if isinstance(exc, DataError):
        # A value the database cannot hold (an integer beyond its column, say): the input's fault.
        logger.info("DataError on %s: %s", context.get("request") and context["request"].path, exc)
        return Response({"message": "A value is out of range for its field."}, status=400)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)

    response = exception_handler(exc, context)
    if response is None:
        return None
    detail = response.data
    if isinstance(exc, exceptions.ValidationError):
        if isinstance(detail, dict):
            response.data = {"message": f"Invalid input: {first_message(detail)}", "errors": detail}
        else:
            response.data = {
                "message": f"Invalid input: {first_message(detail)}",
                "errors": {"non_field_errors": detail},
            }
    else:
        message = detail.get("detail") if isinstance(detail, dict) else detail
        response.data = {"message": str(message)}
    return response
