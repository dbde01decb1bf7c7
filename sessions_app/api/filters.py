from datetime import UTC

import django_filters
from django.core.exceptions import ValidationError
from django_filters.fields import IsoDateTimeField

from sessions_app.models import AgentSession


class UtcIsoDateTimeField(IsoDateTimeField):
    """An ISO 8601 time, compared in UTC: PostgreSQL refuses an offset past ±15:59 (Python takes up to
    ±23:59), and near year 1 or 9999 the conversion overflows; either is a 400 naming the parameter."""

    def to_python(self, value):
        parsed = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise ValidationError("Out of range once converted to UTC.", code="invalid") from None


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class SessionFilter(django_filters.FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=AgentSession.Status.choices)
    agent = django_filters.CharFilter(field_name="agent__slug")
    parent = django_filters.CharFilter(field_name="parent_id")
    started_after = UtcIsoDateTimeFilter(field_name="started_at", lookup_expr="gte")
    started_before = UtcIsoDateTimeFilter(field_name="started_at", lookup_expr="lt")
    intent = django_filters.CharFilter(field_name="intent", lookup_expr="icontains")

    class Meta:
        model = AgentSession
        fields = ["status", "agent", "parent"]
