"""A JSON parser that refuses what the database or the agents downstream cannot hold.

Refused with 400: invalid JSON, duplicate keys, integers outside 64 bits, NUL bytes and lone
surrogates in any string (key or value). Bodies over ``API_MAX_BODY_BYTES`` are refused with
413 before they are read into memory.

Numbers a 64-bit float cannot hold (``1e999``, ``-1e400``) and the ``NaN``/``Infinity``
literals parse to an :class:`OutOfRangeNumber` instead of refusing the whole body: the
serializers (config.api.fields.StrictSerializer) refuse them naming the field, so in a batch
only the item that holds one fails. Left as ``inf`` they reached the database, where SQLite's
JSON check constraint and PostgreSQL's jsonb both refuse them.
"""

import json
import math

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser

from config.api.errors import PayloadTooLarge

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def _parse_int(text: str) -> int:
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise ParseError(f"JSON parse error - integer {text[:30]} does not fit in 64 bits.")
    return value


class OutOfRangeNumber(float):
    """A JSON number no 64-bit float holds, kept with the text it was sent as (for the error)."""

    def __new__(cls, text: str):
        number = super().__new__(cls, text)
        number.text = text[:30]
        return number


def _parse_float(text: str) -> float:
    value = float(text)
    return value if math.isfinite(value) else OutOfRangeNumber(text)


def _parse_constant(name: str) -> OutOfRangeNumber:
    return OutOfRangeNumber(name)  # NaN, Infinity, -Infinity


def _check_string(value: str) -> None:
    if "\x00" in value:
        raise ParseError("JSON parse error - strings may not contain NUL (\\u0000).")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ParseError("JSON parse error - strings may not contain lone surrogates.") from None


def _object_pairs(pairs: list) -> dict:
    result = {}
    for key, value in pairs:
        _check_string(key)
        if key in result:
            raise ParseError(f"JSON parse error - duplicate key {key[:50]!r}.")
        if isinstance(value, str):
            _check_string(value)
        elif isinstance(value, list):
            _check_list(value)
        result[key] = value
    return result


def _check_list(items: list) -> None:
    # The strings of a list (and of lists within it). Objects in it were checked as they were built,
    # and the decoder builds inner values first, so every list is walked once, at whatever depth.
    for item in items:
        if isinstance(item, str):
            _check_string(item)
        elif isinstance(item, list):
            _check_list(item)


def loads_strict(raw: bytes | str):
    try:
        value = json.loads(
            raw,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
            object_pairs_hook=_object_pairs,
        )
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"JSON parse error - {exc}") from None
    if isinstance(value, list):
        _check_list(value)
    elif isinstance(value, str):
        _check_string(value)
    return value


class StrictJSONParser(BaseParser):
    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.API_MAX_BODY_BYTES
        request = (parser_context or {}).get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        if declared and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(f"Request body is {declared} bytes; the limit is {limit}.")
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise PayloadTooLarge(f"Request body is over the limit of {limit} bytes.")
        if not raw.strip():
            raise ParseError("JSON parse error - the request body is empty.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ParseError("JSON parse error - the body is not valid UTF-8.") from None
        return loads_strict(text)
