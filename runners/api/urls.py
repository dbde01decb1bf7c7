from django.urls import path

from runners.api import review_views, ship_views, views

urlpatterns = [
    # tasks/<id>/runs/ (GET the attempts with their usage, POST queue one) is composition's.
    path("tasks/<int64:task_id>/diff/", review_views.TaskDiffView.as_view(), name="task-diff"),
    path("tasks/<int64:task_id>/comments/", review_views.TaskCommentsView.as_view(), name="task-comments"),
    path("tasks/<int64:task_id>/review/", review_views.TaskReviewView.as_view(), name="task-review"),
    path("tasks/<int64:task_id>/merge/", ship_views.TaskMergeView.as_view(), name="task-merge"),
    path("tasks/<int64:task_id>/merge/resolve/", ship_views.TaskMergeResolveView.as_view(), name="task-merge-resolve"),
    path("tasks/<int64:task_id>/pull-request/", ship_views.TaskPullRequestView.as_view(), name="task-pull-request"),
    path("runs/", views.RunListView.as_view(), name="run-list"),
    path("runs/<int64:run_id>/", views.RunDetailView.as_view(), name="run-detail"),
    path("runs/<int64:run_id>/cancel/", views.RunCancelView.as_view(), name="run-cancel"),
    path("runs/<int64:run_id>/answer/", views.RunAnswerView.as_view(), name="run-answer"),
    path("runs/<int64:run_id>/requeue/", views.RunRequeueView.as_view(), name="run-requeue"),
    path("runs/<int64:run_id>/status/", views.RunStatusView.as_view(), name="run-status"),
    path("runs/<int64:run_id>/log/", views.RunLogView.as_view(), name="run-log"),
    path("runners/me/heartbeat/", views.RunnerHeartbeatView.as_view(), name="runner-heartbeat"),
    path("runners/me/next/", views.RunnerNextView.as_view(), name="runner-next"),
    path("runners/me/repositories/", views.RunnerRepositoryView.as_view(), name="runner-repositories"),
    path("runners/me/worktrees/", views.RunnerWorktreeView.as_view(), name="runner-worktrees"),
]
