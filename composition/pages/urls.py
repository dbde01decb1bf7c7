from django.urls import path

from composition.pages import agent_views, needs_you_views, session_views

app_name = "sessions"

urlpatterns = [
    path("sessions/", session_views.session_list, name="list"),
    path("sessions/<str:session_id>/", session_views.session_detail, name="detail"),
    path("sessions/<str:session_id>/log-tail/", session_views.session_log_tail, name="log-tail"),
    path("sessions/<str:session_id>/answer/", session_views.session_answer, name="answer"),
    path("sessions/<str:session_id>/files/<path:path>", session_views.artifact_download, name="artifact"),
    path("agents/", agent_views.agent_list, name="agents"),
    path("needs-you/", needs_you_views.needs_you_count, name="needs_you"),
]
