from django.urls import path

from sessions_app.pages import agent_views, session_views

app_name = "sessions"

urlpatterns = [
    path("sessions/", session_views.session_list, name="list"),
    path("sessions/<str:session_id>/", session_views.session_detail, name="detail"),
    path("agents/", agent_views.agent_list, name="agents"),
]
