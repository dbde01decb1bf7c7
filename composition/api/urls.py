from django.urls import path

from composition.api import resume_views, task_run_views, views

urlpatterns = [
    path("sessions/", views.SessionListCreateView.as_view(), name="session-list"),
    path("tasks/<int64:task_id>/runs/", task_run_views.TaskRunsView.as_view(), name="task-run-queue"),
    path("sessions/<str:session_id>/resume/", resume_views.SessionResumeView.as_view(), name="session-resume"),
]
