from django.urls import path

from runners.pages import change_views, ship_views, views

app_name = "runners"

urlpatterns = [
    path("runners/", views.runners_page, name="list"),
    path("runners/tasks/<int64:task_id>/run/", views.task_run, name="task_run"),
    path("runners/tasks/<int64:task_id>/answer/", views.task_answer, name="task_answer"),
    path("runners/tasks/<int64:task_id>/merge/", ship_views.task_merge_view, name="task_merge"),
    path("runners/tasks/<int64:task_id>/merge/resolve/", ship_views.task_merge_resolve_view, name="task_merge_resolve"),
    path("runners/tasks/<int64:task_id>/pull-request/", ship_views.task_pull_request_view, name="task_pull_request"),
    path("runners/runs/<int64:run_id>/stop/", views.run_stop_view, name="run_stop"),
    path("runners/runs/<int64:run_id>/requeue/", views.run_requeue_view, name="run_requeue"),
    path("runners/sessions/<str:session_id>/run/", views.session_run, name="session_run"),
    path("tasks/<int64:task_id>/change/", change_views.task_change_view, name="task_change"),
    path("tasks/<int64:task_id>/change/lines/", change_views.task_change_lines, name="task_change_lines"),
    path("tasks/<int64:task_id>/change/file/", change_views.task_change_file, name="task_change_file"),
    path("tasks/<int64:task_id>/change/comments/", change_views.task_change_comment, name="task_change_comment"),
    path("tasks/<int64:task_id>/change/review/", change_views.task_change_review, name="task_change_review"),
]
