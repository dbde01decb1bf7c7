"""The board's filters: the API's task filters plus a label and a text search, kept in the URL."""

import json

import django_filters
from django.db import connection
from django.db.models import Q

from board.api.filters import TaskFilter


class BoardFilter(TaskFilter):
    label = django_filters.CharFilter(method="filter_label", label="Label")
    q = django_filters.CharFilter(method="filter_text", label="Text in the title or description")

    class Meta(TaskFilter.Meta):
        fields = ["priority", "assignee", "campaign"]

    def filter_label(self, queryset, name, value):
        if connection.vendor == "postgresql":
            return queryset.filter(labels__contains=[value])
        # SQLite stores the list as json.dumps text: match the label's own encoding, quotes included.
        return queryset.filter(labels__icontains=json.dumps(value))

    def filter_text(self, queryset, name, value):
        return queryset.filter(Q(title__icontains=value) | Q(description__icontains=value))
