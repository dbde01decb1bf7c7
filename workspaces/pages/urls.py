from django.urls import path

from workspaces.pages import download_views, worktree_views

app_name = "workspaces"

urlpatterns = [
    path("worktrees/", worktree_views.worktree_monitor, name="worktrees"),
    # Served on DOWNLOAD_HOST only (workspaces/files/download_host.py).
    path("downloads/<str:token>", download_views.signed_download, name="download"),
]
