from django.urls import path

from composition.api import resume_views, views

urlpatterns = [
    path("sessions/", views.SessionListCreateView.as_view(), name="session-list"),
    path("sessions/<str:session_id>/resume/", resume_views.SessionResumeView.as_view(), name="session-resume"),
]
