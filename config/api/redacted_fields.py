"""Input fields that redact what an agent sends before anything stores it (config/redaction.py).

Validation runs on the text as sent (lengths, URL shape); the value handed on is the redacted one,
so every service and every answer sees only that. Idempotency is unaffected: a write's body hash
(``body_sha256``) is taken from the raw item before validation.
"""

from rest_framework import serializers

from config.redaction import redact_json


class RedactedMixin:
    # run_validation, not to_internal_value: the validators (max_length...) must see the text as
    # sent; capped in to_internal_value, a text over max_length was cut short and stored, not refused.
    def run_validation(self, data=serializers.empty):
        value = redact_json(super().run_validation(data))
        # "[REDACTED]" can be longer than what it replaced (pw=abc): the column's limit still holds.
        limit = getattr(self, "max_length", None)
        if isinstance(value, str) and limit is not None and len(value) > limit:
            value = value[:limit]
        return value


class RedactedCharField(RedactedMixin, serializers.CharField):
    pass


class RedactedURLField(RedactedMixin, serializers.URLField):
    pass


class RedactedJSONField(RedactedMixin, serializers.JSONField):
    pass


class RedactedDictField(RedactedMixin, serializers.DictField):
    pass
