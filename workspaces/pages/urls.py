from django.urls import path

from workspaces.pages import worktree_views

app_name = "workspaces"

urlpatterns = [
    path("worktrees/", worktree_views.worktree_monitor, name="worktrees"),
]
