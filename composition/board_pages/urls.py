from django.urls import path

from composition.board_pages import board_views, import_views, task_form_views, task_repository_views
from composition.run_watch import views as run_watch_views

app_name = "board"

urlpatterns = [
    path("", board_views.board, name="board"),
    path("tasks/new/", task_form_views.task_new, name="task_new"),
    path("tasks/preview/", task_form_views.task_preview, name="task_preview"),
    path("tasks/<int64:task_id>/", board_views.task_panel, name="task"),
    path("tasks/<int64:task_id>/edit/", task_form_views.task_edit_view, name="task_edit"),
    path("tasks/<int64:task_id>/move/", board_views.task_move_view, name="task_move"),
    path("tasks/<int64:task_id>/repository/", task_repository_views.task_repository_view, name="task_repository"),
    path("tasks/<int64:task_id>/watch/", run_watch_views.task_run_watch, name="task_run_watch"),
    path("tasks/<int64:task_id>/runs/<int64:run_id>/log/", run_watch_views.task_run_log, name="task_run_log"),
    path("priorities/", import_views.priorities, name="priorities"),
    path("campaigns/", import_views.campaigns, name="campaigns"),
    path("priorities/preview/", import_views.priorities_preview_partial, name="priorities_preview"),
    path("priorities/apply/", import_views.priorities_apply_view, name="priorities_apply"),
    path("campaigns/preview/", import_views.campaigns_preview_partial, name="campaigns_preview"),
    path("campaigns/import/", import_views.campaigns_import_view, name="campaigns_import"),
]
