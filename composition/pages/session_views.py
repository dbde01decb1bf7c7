"""Session pages for engineers: the list with search, the live detail page, its log tail,
artifact downloads and the reply box of a session waiting for input."""

import os

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from composition import page_selectors
from config.actors import Actor
from config.api.errors import DomainError
from config.live import live_seq_current
from config.pages import ENGINEERING, page_for
from sessions_app import logs
from sessions_app.elicitations import elicitation_form_values
from sessions_app.input_requests import QuestionChanged, session_answer_input
from sessions_app.live import session_group
from sessions_app.models import AgentSession
from sessions_app.selectors import session_question
from workspaces.files.download_host import download_host_enabled, download_redirect
from workspaces.files.download_response import file_response
from workspaces.files.services import artifact_open


@page_for(ENGINEERING)
@require_GET
def session_list(request):
    filters = page_selectors.SessionFilters.from_query(request.GET)
    page = page_selectors.session_page_list(filters=filters, page=request.GET.get("page", 1))
    keep = request.GET.copy()  # the filters, kept in the pagination links
    keep.pop("page", None)
    context = {
        "page": page,
        "filters": filters,
        "agents": page_selectors.agent_choices(),
        "statuses": AgentSession.Status.choices,
        "keep_query": keep.urlencode(),
    }
    return render(request, "sessions/session_list.html", context)


@page_for(ENGINEERING)
@require_GET
def session_detail(request, session_id: str):
    return _render_detail(request, session_id)


def _render_detail(request, session_id: str, *, answer: str = "", answer_error: str = "", status: int = 200):
    # Read before the page's rows: a change committed in between shows as a gap, and is refetched.
    live_seq = live_seq_current(session_group(session_id))
    detail = _or_404(page_selectors.session_detail_get, session_id=session_id)
    offset = logs.session_log_tail_offset(session=detail.session)
    log = logs.session_log_read(session=detail.session, offset=offset)
    context = {
        "d": detail,
        "session": detail.session,
        "question": detail.question,
        "log": log,
        "log_skipped": offset > 0,
        "log_path": "/".join(logs.session_log_parts(session=detail.session) or ()),
        "answer": answer,
        "answer_error": answer_error,
        "live_seq": live_seq,
    }
    return render(request, "sessions/session_detail.html", context, status=status)


@page_for(ENGINEERING)
@require_GET
def session_log_tail(request, session_id: str):
    """What the log grew by since ``offset``: polled every 2 s by the detail page."""
    session = _or_404(_session, session_id=session_id)
    raw = request.GET.get("offset", "0")
    offset = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 19 else 0
    log = logs.session_log_read(session=session, offset=offset)
    return render(request, "sessions/_log_poll.html", {"session": session, "log": log, "append": True})


@page_for(ENGINEERING)
@require_POST
def session_answer(request, session_id: str):
    session = _or_404(_session, session_id=session_id)
    answer = request.POST.get("answer", "")
    try:
        session_answer_input(
            actor=Actor(user=request.user),
            session=session,
            answer=answer,
            decision=request.POST.get("decision", ""),
            form=elicitation_form_values(request.POST),
            suggestion=request.POST.get("suggestion"),  # an "Always allow ..." button
            # The question the form showed (its hidden field; absent reads as none): an answer is
            # never given to a question the person did not see.
            question_seq=request.POST.get("question", ""),
        )
    except DomainError as error:
        if request.htmx:
            # htmx swaps only 2xx answers: the box comes back with the error (and the question now
            # open, when that changed) in it.
            context = {
                "session": session,
                "question": _question(session),
                "answer": answer,
                "answer_error": error.message,
            }
            return render(request, "sessions/_input_box.html", context)
        status = 409 if isinstance(error, QuestionChanged) else 400
        return _render_detail(request, session_id, answer=answer, answer_error=error.message, status=status)
    if request.htmx:
        session.refresh_from_db()
        return render(request, "sessions/_input_box.html", {"session": session, "answer_sent": True})
    messages.success(request, "Answer sent; the session is running again.")
    return redirect(reverse("sessions:detail", args=[session_id]))


@page_for(ENGINEERING)
@require_GET
def artifact_download(request, session_id: str, path: str):
    """Download a file of the session's workspace (people's side of the files API)."""
    session = _or_404(_session, session_id=session_id)
    if session.workspace is None:
        raise Http404("This session has no workspace.")
    fd, size, logical = _or_404(artifact_open, workspace=session.workspace, path=path)
    if download_host_enabled():
        os.close(fd)
        return download_redirect(request, workspace=session.workspace, path=logical)
    return file_response(request, fd=fd, size=size, name=logical, range_header=request.headers.get("Range"))


def _session(*, session_id: str) -> AgentSession:
    session = AgentSession.objects.select_related("agent", "workspace").filter(pk=session_id).first()
    if session is None:
        raise DomainError(f"Session {session_id!r} not found.", code="not_found")
    return session


def _question(session: AgentSession):
    return session_question(session=session) if session.status == AgentSession.Status.WAITING_FOR_INPUT else None


def _or_404(func, **kwargs):
    # Page views answer a missing (or unsafely named) thing with the 404 page, not a JSON error.
    try:
        return func(**kwargs)
    except DomainError as error:
        if error.code in ("not_found", "invalid"):
            raise Http404(error.message) from None
        raise
