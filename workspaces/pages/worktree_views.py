"""The worktree monitor page: holder, lease, commits ahead, uncommitted and recent files, live."""

from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from config.pages import ENGINEERING, page_for
from workspaces.worktrees.selectors import worktree_monitor_list

REFRESH_SECONDS = 5


@page_for(ENGINEERING)
@require_GET
def worktree_monitor(request):
    context = {"rows": worktree_monitor_list(), "now": timezone.now(), "refresh": REFRESH_SECONDS}
    # The page polls itself; an htmx poll gets the list alone.
    template = "workspaces/_worktree_list.html" if request.htmx else "workspaces/worktrees.html"
    return render(request, template, context)
