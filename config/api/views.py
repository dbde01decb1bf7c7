"""Helpers shared by the API views of every app."""

from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from config.actors import Actor
from config.api.errors import DomainError
from config.idempotency import IncomingItem, ItemResult, canonical_sha256


def actor_from_request(request) -> Actor:
    agent = getattr(request.user, "agent", None)
    if agent is not None:
        return Actor(agent=agent, api_key=request.auth)
    return Actor(user=request.user)


def require_object(data) -> dict:
    if not isinstance(data, dict):
        raise ValidationError({"non_field_errors": ["Expected a JSON object."]})
    return data


def validate_input(serializer_class: type[serializers.Serializer], data, **context) -> dict:
    serializer = serializer_class(data=require_object(data), context=context)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def incoming_items(
    raw, serializer_class, *, max_items: int, fast_path=None
) -> tuple[list[IncomingItem], list[ItemResult], bool]:
    """Validate a single item or a batch. Returns valid items, results for the invalid ones,
    and whether the body was a batch.

    ``fast_path(item)`` may return the validated data of a plainly valid item without
    building a serializer (a batch of 1,000 would otherwise spend most of its time there);
    it returns None for anything it is not sure of, and the serializer then decides and
    words the errors.
    """
    is_batch = isinstance(raw, list)
    raw_items = raw if is_batch else [require_object(raw)]
    if is_batch and not raw_items:
        raise ValidationError({"non_field_errors": ["A batch needs at least one item."]})
    if len(raw_items) > max_items:
        raise DomainError(f"A batch holds at most {max_items} items; got {len(raw_items)}.", code="too_large")
    valid, invalid = [], []
    for index, item in enumerate(raw_items):
        if not isinstance(item, dict):
            invalid.append(ItemResult(index=index, status=400, message="Expected a JSON object."))
            continue
        data = fast_path(item) if fast_path is not None else None
        if data is not None:
            valid.append(
                IncomingItem(index=index, data=data, body_sha256=canonical_sha256(item), client_id=data.get("id"))
            )
            continue
        serializer = serializer_class(data=item)
        if not serializer.is_valid():
            invalid.append(
                ItemResult(
                    index=index, status=_status_of(serializer.errors), errors=serializer.errors, message="Invalid item."
                )
            )
            continue
        data = serializer.validated_data
        valid.append(IncomingItem(index=index, data=data, body_sha256=canonical_sha256(item), client_id=data.get("id")))
    if not is_batch and invalid:
        only = invalid[0]
        if only.status == 413:
            raise DomainError(_first(only.errors), code="too_large")
        raise ValidationError(only.errors)
    return valid, invalid, is_batch


def _first(errors) -> str:
    for value in errors.values():
        return str(value[0] if isinstance(value, list) else value)
    return "Too large."


def _status_of(errors) -> int:
    flat = [
        getattr(e, "code", None) for value in errors.values() for e in (value if isinstance(value, list) else [value])
    ]
    return 413 if "too_large" in flat else 400


def write_response(*, results: list[ItemResult], is_batch: bool, render) -> Response:
    """One item: its own status and body. A batch: 201 when all stored (200 if all were
    replays), 207 with one result per item when some failed; when all failed, their common
    status, else 400."""
    results = sorted(results, key=lambda r: r.index)
    if not is_batch:
        only = results[0]
        if only.status >= 400:
            body = {"message": only.message}
            if only.errors:
                body["errors"] = only.errors
            return Response(body, status=only.status)
        return Response(render(only.obj), status=only.status)
    body = []
    for result in results:
        entry = {"index": result.index, "status": result.status}
        if result.status < 400:
            entry["item"] = render(result.obj)
        else:
            entry["message"] = result.message
            if result.errors:
                entry["errors"] = result.errors
        body.append(entry)
    failed = sum(1 for r in results if r.status >= 400)
    body = {"results": body, "stored": len(results) - failed, "failed": failed}
    if failed == len(results):
        statuses = {r.status for r in results}
        code = statuses.pop() if len(statuses) == 1 else status.HTTP_400_BAD_REQUEST
        # An error status: its body is an error body too (a message), with the per-item results.
        body = {"message": f"No item was stored: all {failed} failed; see results.", **body}
    elif failed:
        code = status.HTTP_207_MULTI_STATUS
    elif all(r.status == 200 for r in results):
        code = status.HTTP_200_OK
    else:
        code = status.HTTP_201_CREATED
    return Response(body, status=code)
