"""The worktree monitor page (issue 5)."""

from django.shortcuts import render

from config.pages import ENGINEERING, page_for


@page_for(ENGINEERING)
def worktree_monitor(request):
    return render(request, "workspaces/worktrees.html", {})
