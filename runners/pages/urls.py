from django.urls import path

from runners.pages import views

app_name = "runners"

urlpatterns = [
    path("runners/", views.runners_page, name="list"),
    path("runners/tasks/<int64:task_id>/run/", views.task_run, name="task_run"),
    path("runners/tasks/<int64:task_id>/answer/", views.task_answer, name="task_answer"),
    path("runners/runs/<int64:run_id>/stop/", views.run_stop_view, name="run_stop"),
    path("runners/sessions/<str:session_id>/run/", views.session_run, name="session_run"),
]
