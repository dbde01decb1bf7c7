"""Serializer building blocks shared by every app's API."""

from functools import cache

from django.core.validators import RegexValidator
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from config.api.parsers import INT64_MAX, INT64_MIN, OutOfRangeNumber


class AwareDateTimeField(serializers.DateTimeField):
    """An ISO 8601 timestamp that must say its offset: a naive time is ambiguous, so refused."""

    default_error_messages = {"naive": "Timestamp must include a UTC offset, such as 2026-01-01T12:00:00Z."}

    def to_internal_value(self, value):
        if isinstance(value, str):
            try:
                parsed = parse_datetime(value.strip())
            except ValueError:
                parsed = None  # well-formed but impossible (month 13): the parent reports it
            if parsed is not None and timezone.is_naive(parsed):
                self.fail("naive")
        return super().to_internal_value(value)


class Int64Field(serializers.IntegerField):
    def __init__(self, **kwargs):
        kwargs.setdefault("min_value", INT64_MIN)
        kwargs.setdefault("max_value", INT64_MAX)
        super().__init__(**kwargs)


def _wrong_type(field: serializers.Field, value) -> str | None:
    """What is wrong with the JSON type of ``value`` for ``field``, or None.

    DRF coerces 12 to "12" and "12" to 12; an agent that sends the wrong type has a
    bug, and silently coercing it hides that.
    """
    if value is None:
        return None  # allow_null decides
    if isinstance(field, serializers.BooleanField):
        return None if isinstance(value, bool) else "Must be true or false."
    if isinstance(field, serializers.IntegerField):
        return None if isinstance(value, int) and not isinstance(value, bool) else "Must be an integer."
    if isinstance(field, serializers.CharField | serializers.ChoiceField):
        return None if isinstance(value, str) else "Must be a string."
    if isinstance(field, serializers.ListField):
        if not isinstance(value, list):
            return "Must be a list."
        for item in value:
            problem = _wrong_type(field.child, item)
            if problem:
                return f"Each item: {problem[0].lower()}{problem[1:]}"
    return None


def _out_of_range(value, path: str) -> str | None:
    """Where in ``value`` a number no 64-bit float holds sits (see config.api.parsers), worded
    for the error, or None. Every input serializer checks every field it is given, so no JSON
    field of any endpoint can carry one to the database."""
    if isinstance(value, OutOfRangeNumber):
        return f"Number out of range: {value.text} at {path}; JSON numbers must fit a 64-bit float."
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list | float):
                problem = _out_of_range(item, f"{path}.{key}")
                if problem:
                    return problem
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, dict | list | float):
                problem = _out_of_range(item, f"{path}[{index}]")
                if problem:
                    return problem
    return None


class StrictSerializer(serializers.Serializer):
    """An input serializer that refuses unknown fields, values of the wrong JSON type and
    numbers out of the float range."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            errors = {name: [f'Unknown field "{name[:100]}"; {self._expected()}.'] for name in unknown}
            for name, field in self.fields.items():
                if name in data:
                    problem = _out_of_range(data[name], name) or _wrong_type(field, data[name])
                    if problem:
                        errors[name] = [problem]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)

    def _expected(self) -> str:
        # A misspelt or guessed field (a milestone's "title" for "text") is fixed at once when
        # the error names what would have been taken: the required fields first.
        writable = [(name, field) for name, field in self.fields.items() if not field.read_only]
        names = [name for name, field in writable if field.required] + [
            name for name, field in writable if not field.required
        ]
        return f"expected: {', '.join(names)}" if names else "this request takes no fields"


# An http(s) link, or empty: one regular expression, so the schema states the rule exactly (Django's
# URLValidator also checks host label lengths and IDNA, which no schema pattern can say). No space
# or control character anywhere, written as a range: regex engines disagree on what \s holds.
HTTP_URL_OR_EMPTY = RegexValidator(
    r"^(?:https?://[^\x00-\x20\x7f/?#]+(?:[/?#][^\x00-\x20\x7f]*)?)?$", "Enter an http:// or https:// URL."
)


class ClientIdField(serializers.CharField):
    """A client-chosen idempotency id."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 128)
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault("help_text", "Client-chosen id; retrying with the same id never stores a second row.")
        super().__init__(**kwargs)


@cache
def _datetime_field() -> serializers.DateTimeField:
    # Built on first use: DRF reads its settings when a field is made, too early at import.
    return serializers.DateTimeField()


def datetime_output(value):
    """A datetime (or None) as DRF's DateTimeField shows it, for the hand-written renderers of the
    hottest endpoints (a serializer's field machinery costs more than their whole answer)."""
    return None if value is None else _datetime_field().to_representation(value)
