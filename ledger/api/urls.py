from django.urls import path

from ledger.api import views

urlpatterns = [
    path("sessions/<str:session_id>/tool-calls/", views.SessionToolCallsView.as_view(), name="session-tool-calls"),
    path(
        "sessions/<str:session_id>/tool-calls/<str:client_id>/",
        views.SessionToolCallByClientIdView.as_view(),
        name="session-tool-call-by-client-id",
    ),
    path("tool-calls/<int64:tool_call_id>/", views.ToolCallDetailView.as_view(), name="tool-call-detail"),
]
