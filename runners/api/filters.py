import django_filters

from board.api.filters import IdFilter
from config.api.parsers import INT64_MAX
from runners.models import Run


class RunFilter(django_filters.FilterSet):
    status = django_filters.MultipleChoiceFilter(choices=Run.Status.choices)
    task = IdFilter(field_name="task_id", min_value=1, max_value=INT64_MAX)
    runner = django_filters.CharFilter(field_name="runner__name", help_text="The runner's name.")
    provider = django_filters.CharFilter()

    class Meta:
        model = Run
        fields = ["status", "task", "runner", "provider"]
