import django_filters

from board.models import Task


class TaskFilter(django_filters.FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=Task.Status.choices)
    priority = django_filters.MultipleChoiceFilter(choices=Task.Priority.choices)
    assignee = django_filters.CharFilter(field_name="assignee__slug")
    campaign = django_filters.NumberFilter(field_name="campaign_id")
    session = django_filters.CharFilter(field_name="session_id")
    q = django_filters.CharFilter(field_name="title", lookup_expr="icontains", label="Text in the title")

    class Meta:
        model = Task
        fields = ["status", "priority", "assignee", "campaign", "session"]
