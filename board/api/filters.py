import django_filters
from django import forms
from drf_spectacular.utils import extend_schema_field

from board.models import Task
from config.api.parsers import INT64_MAX


@extend_schema_field({"type": "integer", "format": "int64", "minimum": 1, "maximum": INT64_MAX})
class IdFilter(django_filters.NumberFilter):
    """A whole number that fits a 64-bit id column; anything else is a 400, not a 500 from the driver."""

    field_class = forms.IntegerField


class TaskFilter(django_filters.FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=Task.Status.choices)
    priority = django_filters.MultipleChoiceFilter(choices=Task.Priority.choices)
    assignee = django_filters.CharFilter(field_name="assignee__slug")
    campaign = IdFilter(field_name="campaign_id", min_value=1, max_value=INT64_MAX)
    session = django_filters.CharFilter(field_name="session_id")
    q = django_filters.CharFilter(field_name="title", lookup_expr="icontains", label="Text in the title")

    class Meta:
        model = Task
        fields = ["status", "priority", "assignee", "campaign", "session"]
