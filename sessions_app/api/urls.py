from django.urls import path

from sessions_app.api import input_request_views, log_views, views

urlpatterns = [
    path("agents/me/", views.AgentMeView.as_view(), name="agent-me"),
    path("agents/me/heartbeat/", views.AgentHeartbeatView.as_view(), name="agent-heartbeat"),
    path("sessions/<str:session_id>/", views.SessionDetailView.as_view(), name="session-detail"),
    path("sessions/<str:session_id>/transition/", views.SessionTransitionView.as_view(), name="session-transition"),
    path("sessions/<str:session_id>/heartbeat/", views.SessionHeartbeatView.as_view(), name="session-heartbeat"),
    path("sessions/<str:session_id>/events/", views.SessionEventsView.as_view(), name="session-events"),
    path("sessions/<str:session_id>/checkpoints/", views.SessionCheckpointsView.as_view(), name="session-checkpoints"),
    path("sessions/<str:session_id>/milestones/", views.SessionMilestonesView.as_view(), name="session-milestones"),
    path("sessions/<str:session_id>/log/", log_views.SessionLogView.as_view(), name="session-log"),
    path(
        "sessions/<str:session_id>/input-requests/<str:request_id>/",
        input_request_views.InputRequestView.as_view(),
        name="session-input-request",
    ),
]
