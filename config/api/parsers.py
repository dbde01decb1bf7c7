"""A JSON parser that refuses what the database or the agents downstream cannot hold.

Refused with 400: invalid JSON, NaN/Infinity, duplicate keys, integers outside 64 bits,
NUL bytes and lone surrogates in any string (key or value). Bodies over
``API_MAX_BODY_BYTES`` are refused with 413 before they are read into memory.
"""

import json

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


def _parse_constant(name: str):
    raise ParseError(f"JSON parse error - {name} is not allowed.")


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
        result[key] = value
    return result


def _check_list_strings(value) -> None:
    # Strings inside objects are checked as the objects are built; strings directly in
    # lists (and a bare top-level string) are not, so walk the lists once.
    if isinstance(value, list):
        for item in value:
            if isinstance(item, str):
                _check_string(item)
            else:
                _check_list_strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            if isinstance(item, list):
                _check_list_strings(item)
    elif isinstance(value, str):
        _check_string(value)


def loads_strict(raw: bytes | str):
    try:
        value = json.loads(
            raw,
            parse_int=_parse_int,
            parse_constant=_parse_constant,
            object_pairs_hook=_object_pairs,
        )
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"JSON parse error - {exc}") from None
    _check_list_strings(value)
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
