from django.urls import path

from runners.api import views

urlpatterns = [
    path("tasks/<int64:task_id>/runs/", views.TaskRunQueueView.as_view(), name="task-run-queue"),
    path("runs/", views.RunListView.as_view(), name="run-list"),
    path("runs/<int64:run_id>/", views.RunDetailView.as_view(), name="run-detail"),
    path("runs/<int64:run_id>/cancel/", views.RunCancelView.as_view(), name="run-cancel"),
]
