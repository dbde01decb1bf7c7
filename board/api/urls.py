from django.urls import path

from board.api import import_views, sync_views, views

urlpatterns = [
    path("tasks/", views.TaskListCreateView.as_view(), name="task-list"),
    path("tasks/claim-next/", views.TaskClaimNextView.as_view(), name="task-claim-next"),
    path("tasks/<int64:task_id>/", views.TaskDetailView.as_view(), name="task-detail"),
    path("tasks/<int64:task_id>/claim/", views.TaskClaimView.as_view(), name="task-claim"),
    path("tasks/<int64:task_id>/release/", views.TaskReleaseView.as_view(), name="task-release"),
    path("tasks/<int64:task_id>/complete/", views.TaskCompleteView.as_view(), name="task-complete"),
    path("tasks/<int64:task_id>/fail/", views.TaskFailView.as_view(), name="task-fail"),
    path("campaigns/", views.CampaignListCreateView.as_view(), name="campaign-list"),
    # Before campaigns/<id>/, so these words are never read as an id.
    path("campaigns/import/", import_views.CampaignImportView.as_view(), name="campaign-import"),
    path("campaigns/files/", import_views.CampaignFileListView.as_view(), name="campaign-files"),
    path("campaigns/<int64:campaign_id>/", views.CampaignDetailView.as_view(), name="campaign-detail"),
    path("priorities/", import_views.PriorityFileListView.as_view(), name="priority-files"),
    path("priorities/import/", import_views.PriorityImportView.as_view(), name="priority-import"),
    path("sync/", sync_views.SyncView.as_view(), name="sync"),
    path("sync/issues/", sync_views.SyncIssueListView.as_view(), name="sync-issues"),
    path("sync/drift/", sync_views.SyncDriftView.as_view(), name="sync-drift"),
]
