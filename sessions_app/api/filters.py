import django_filters

from sessions_app.models import AgentSession


class SessionFilter(django_filters.FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=AgentSession.Status.choices)
    agent = django_filters.CharFilter(field_name="agent__slug")
    parent = django_filters.CharFilter(field_name="parent_id")
    started_after = django_filters.IsoDateTimeFilter(field_name="started_at", lookup_expr="gte")
    started_before = django_filters.IsoDateTimeFilter(field_name="started_at", lookup_expr="lt")
    intent = django_filters.CharFilter(field_name="intent", lookup_expr="icontains")

    class Meta:
        model = AgentSession
        fields = ["status", "agent", "parent"]
