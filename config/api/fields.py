"""Serializer building blocks shared by every app's API."""

from functools import cache

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from config.api.parsers import INT64_MAX, INT64_MIN


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


class StrictSerializer(serializers.Serializer):
    """An input serializer that refuses unknown fields and values of the wrong JSON type."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            errors = {name: ["Unknown field."] for name in sorted(set(data) - set(self.fields))}
            for name, field in self.fields.items():
                if name in data:
                    problem = _wrong_type(field, data[name])
                    if problem:
                        errors[name] = [problem]
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


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
