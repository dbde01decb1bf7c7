"""Serializer building blocks shared by every app's API."""

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


class StrictSerializer(serializers.Serializer):
    """An input serializer that refuses fields it does not know, so typos are not ignored."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


class ClientIdField(serializers.CharField):
    """A client-chosen idempotency id."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 128)
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault("help_text", "Client-chosen id; retrying with the same id never stores a second row.")
        super().__init__(**kwargs)
