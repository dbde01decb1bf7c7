from django.urls import path

from workspaces.api import archive_views, views, worktree_views

urlpatterns = [
    path("sessions/<str:session_id>/files/", views.SessionFilesView.as_view(), name="session-files"),
    path("sessions/<str:session_id>/files/<path:path>", views.SessionFileView.as_view(), name="session-file"),
    path("artifacts/<int64:artifact_id>/export/", views.ArtifactExportView.as_view(), name="artifact-export"),
    path(
        "workspaces/<int64:workspace_id>/restore/",
        archive_views.WorkspaceRestoreView.as_view(),
        name="workspace-restore",
    ),
    path("repositories/", worktree_views.RepositoryListView.as_view(), name="repository-list"),
    path(
        "repositories/<int64:repository_id>/worktrees/",
        worktree_views.RepositoryWorktreesView.as_view(),
        name="repository-worktrees",
    ),
    path("worktrees/<int64:worktree_id>/", worktree_views.WorktreeDetailView.as_view(), name="worktree-detail"),
    path("worktrees/<int64:worktree_id>/claim/", worktree_views.WorktreeClaimView.as_view(), name="worktree-claim"),
    path(
        "worktrees/<int64:worktree_id>/release/", worktree_views.WorktreeReleaseView.as_view(), name="worktree-release"
    ),
    path(
        "worktrees/<int64:worktree_id>/config-sync/",
        worktree_views.WorktreeConfigSyncView.as_view(),
        name="worktree-config-sync",
    ),
]
