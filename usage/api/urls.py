from django.urls import path

from usage.api import views

# The OTLP/HTTP paths have no trailing slash: exporters post to <endpoint>/v1/logs exactly.
urlpatterns = [
    path("otlp/v1/logs", views.OtlpLogsView.as_view(), name="otlp-logs"),
    path("otlp/v1/metrics", views.OtlpMetricsView.as_view(), name="otlp-metrics"),
    path("otlp/v1/traces", views.OtlpTracesView.as_view(), name="otlp-traces"),
    path("usage/", views.UsageRollupView.as_view(), name="usage-rollup"),
    path("budgets/", views.BudgetListView.as_view(), name="budget-list"),
    path("budgets/<int64:budget_id>/", views.BudgetDetailView.as_view(), name="budget-detail"),
]
