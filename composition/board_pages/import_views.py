"""Priority-file and campaign imports from the browser (issue 5).

Each view calls one service and renders; the services decide. A refused file name or a bad
file shows its message where the preview would be and writes nothing.
"""

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from board.imports.campaigns import campaign_files, campaign_import, campaign_preview
from board.imports.priorities import priorities_apply, priorities_files, priorities_preview
from board.imports.selectors import campaign_progress_list
from config.actors import Actor
from config.api.errors import DomainError
from config.pages import BOARD, page_for
from runners.services_pages import RunsQueued, runs_queue_for_tasks


def _preview_context(file_name: str | None) -> dict:
    if not file_name:
        return {}
    try:
        return {"file": file_name, "preview": priorities_preview(file_name=file_name)}
    except DomainError as exc:
        return {"file": file_name, "error": exc.message}


@page_for(BOARD)
@require_GET
def priorities(request):
    """The files, and the preview of one when ``?file=`` names it (the page works without JavaScript)."""
    context = {"files": priorities_files(), "folder": settings.REPORTS_DIR, **_preview_context(request.GET.get("file"))}
    return render(request, "board/priorities.html", context, status=400 if "error" in context else 200)


@page_for(BOARD)
@require_GET
def priorities_preview_partial(request):
    return render(request, "board/_priority_preview.html", _preview_context(request.GET.get("file", "")))


@page_for(BOARD)
@require_POST
def priorities_apply_view(request):
    file_name = request.POST.get("file", "")
    try:
        result = priorities_apply(actor=Actor(user=request.user), file_name=file_name)
    except DomainError as exc:
        if request.htmx:
            return render(request, "board/_priority_preview.html", {"file": file_name, "error": exc.message})
        messages.error(request, exc.message)
        return redirect("board:priorities")
    # "Run with": after the import committed, so a refused run never undoes it (runners/services_pages.py).
    runs = runs_queue_for_tasks(actor=Actor(user=request.user), task_ids=result.created, provider=_run_with(request))
    if request.htmx:
        return render(request, "board/_priority_result.html", {"result": result, "runs": runs})
    messages.success(request, _applied_message(result))
    for warning in result.warnings:
        messages.warning(request, warning)
    _runs_message(request, runs)
    return redirect(f"{reverse('board:priorities')}?{urlencode({'file': file_name})}")


def _run_with(request) -> str:
    return request.POST.get("run_with", "")


def _runs_message(request, runs: RunsQueued | None) -> None:
    if runs is None:
        return
    if runs.runs:
        messages.success(
            request, f"Queued {len(runs.runs)} run{'s' if len(runs.runs) != 1 else ''} with {runs.provider}."
        )
    elif not runs.refused:
        messages.info(request, f"No new ready task to run with {runs.provider}.")
    for refusal in runs.refused:
        messages.error(request, refusal)


def _applied_message(result) -> str:
    if not result.changed_anything:
        return f"{result.file_name} was already up to date: nothing changed."
    return (
        f"Imported {result.file_name}: {len(result.created)} created, {len(result.updated)} updated, "
        f"{len(result.blocked)} blocked."
    )


def _campaign_preview_context(file_name: str | None) -> dict:
    if not file_name:
        return {}
    try:
        return {"file": file_name, "preview": campaign_preview(file_name=file_name)}
    except DomainError as exc:
        return {"file": file_name, "error": exc.message}


@page_for(BOARD)
@require_GET
def campaigns(request):
    """The definitions and campaigns, and the preview of one definition when ``?file=`` names it
    (the page works without JavaScript), as the priorities page."""
    campaign_rows = list(campaign_progress_list())
    by_file = {campaign.source_file: campaign for campaign in campaign_rows if campaign.source_file}
    files = [(info, by_file.get(info.name)) for info in campaign_files()]
    context = {"files": files, "campaigns": campaign_rows, "folder": settings.TASK_DEFS_DIR}
    context |= _campaign_preview_context(request.GET.get("file"))
    return render(request, "board/campaigns.html", context, status=400 if "error" in context else 200)


@page_for(BOARD)
@require_GET
def campaigns_preview_partial(request):
    context = _campaign_preview_context(request.GET.get("file", ""))
    # 200 with the message in the preview, as the priorities page: htmx swaps only 2xx answers.
    return render(request, "board/_campaign_preview.html", context)


@page_for(BOARD)
@require_POST
def campaigns_import_view(request):
    try:
        result = campaign_import(actor=Actor(user=request.user), file_name=request.POST.get("file", ""))
    except DomainError as exc:
        messages.error(request, exc.message)
        return redirect("board:campaigns")
    runs = runs_queue_for_tasks(
        actor=Actor(user=request.user), task_ids=result.tasks_created, provider=_run_with(request)
    )
    campaign = result.campaign
    if result.created:
        text = f"Started campaign {campaign.name!r} with {len(result.tasks_created)} deliverable tasks."
    elif result.changed_anything or result.leads_created:
        text = (
            f"Updated campaign {campaign.name!r}: {len(result.tasks_created)} tasks added, "
            f"{len(result.tasks_updated)} updated, {result.leads_created} leads added."
        )
    else:
        text = f"Campaign {campaign.name!r} was already up to date."
    messages.success(request, text)
    _runs_message(request, runs)
    return redirect(f"{reverse('board:campaigns')}#campaign-{campaign.pk}")
