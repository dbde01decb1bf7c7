"""The Runners page and the run boxes' actions (Run, Stop, and their polls). Thin: the services
in runners/services.py and runners/services_pages.py decide, page_selectors read.

A refused action (not staff, a run already active) is shown in the box it came from with status
200 under htmx, which swaps only 2xx answers; without htmx it is a message on the page it came from.
"""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from config.actors import Actor
from config.api.errors import DomainError
from config.pages import BOARD, ENGINEERING, page_for, user_may
from runners import page_selectors
from runners.models import Run
from runners.run_waiting import run_requeue_elsewhere
from runners.selectors import run_get
from runners.services import run_queue
from runners.services_pages import run_stop
from sessions_app.elicitations import elicitation_form_values
from sessions_app.input_requests import session_answer_input


def _or_404(selector, **kwargs):
    try:
        return selector(**kwargs)
    except DomainError as error:
        raise Http404(error.message) from None


def _may_run(request) -> bool:
    # Run and Stop are for the people of the board (product owners and engineers), as the services allow.
    return user_may(request.user, BOARD)


def _box_context(request, box) -> dict:
    return {"box": box, "may_run": _may_run(request)}


@require_GET
@page_for(BOARD)
def runners_page(request):
    context = {"runners": page_selectors.runner_page_list(), "runs": page_selectors.recent_runs()}
    return render(request, "runners/runners.html", context)


@require_http_methods(["GET", "POST"])
@page_for(BOARD)
def task_run(request, task_id: int):
    """GET: the task's run box (polled while a run is active). POST: queue a run of the task."""
    task = _or_404(page_selectors.task_get, task_id=task_id)
    error = ""
    if request.method == "POST":
        prompt = request.POST.get("prompt", "").strip()
        try:
            run_queue(
                actor=Actor(user=request.user),
                task=task,
                provider=request.POST.get("provider", "").strip(),
                prompt=prompt or None,  # empty: the task's title and description
            )
        except DomainError as exc:
            error = exc.message
        if not request.htmx:
            (messages.error if error else messages.success)(request, error or "Run queued.")
            return redirect("board:task", task_id=task.pk)
    box = page_selectors.task_run_box(task=task, error=error)
    return render(request, "runners/_task_run.html", _box_context(request, box))


@require_POST
@page_for(BOARD)
def run_stop_view(request, run_id: int):
    """Stop a run from its task's box (``box=task``) or its session page (``box=session``)."""
    run = _or_404(run_get, run_id=run_id)
    error = ""
    try:
        run = run_stop(actor=Actor(user=request.user), run=run)
    except DomainError as exc:
        error = exc.message
    on_session = request.POST.get("box") == "session" and run.session_id is not None
    if not request.htmx:
        (messages.error if error else messages.success)(request, error or "Stop requested.")
        if on_session:
            return redirect("sessions:detail", session_id=run.session_id)
        return redirect("board:task", task_id=run.task_id)
    if on_session:
        context = {"run": page_selectors.session_run(session_id=run.session_id), "error": error}
        return render(request, "runners/_session_run.html", {**context, "may_run": _may_run(request)})
    box = page_selectors.task_run_box(task=run.task, error=error)
    return render(request, "runners/_task_run.html", _box_context(request, box))


@require_POST
@page_for(BOARD)
def run_requeue_view(request, run_id: int):
    """Re-queue a waiting run for any runner, from its task's box: the one holding its worktree is gone,
    or the person would rather not wait for it (a fresh start, attempt + 1)."""
    run = _or_404(run_get, run_id=run_id)
    error = ""
    try:
        run_requeue_elsewhere(actor=Actor(user=request.user), run=run)
    except DomainError as exc:
        error = exc.message
    if not request.htmx:
        (messages.error if error else messages.success)(request, error or "Run re-queued for any runner.")
        return redirect("board:task", task_id=run.task_id)
    box = page_selectors.task_run_box(task=run.task, error=error)
    return render(request, "runners/_task_run.html", _box_context(request, box))


def _answer_refusal(box, *, session_id: str, question_seq: str) -> str:
    """Why an answer from the run box is not sent, or "": the box must still show a waiting session,
    the one the form was for, and the same question (a new one may ask something else)."""
    if box.waiting is None or box.waiting.pk != session_id:
        return _parked_refusal(box) or (
            "The agent is not waiting for an answer any more: it was answered elsewhere or the session moved on."
        )
    asked = str(box.question.seq) if box.question is not None else ""
    if question_seq != asked:
        return "The agent asked another question meanwhile: read it, then send your answer again."
    return ""


def _parked_refusal(box) -> str:
    """A run that waited for a person (runners/run_waiting.py) and was answered, or ended: its state."""
    run = box.active or box.last
    if run is None or not run.waiting_for:
        return ""
    if run.status == Run.Status.WAITING and run.answered_at is not None:
        who = run.answer.get("answered_by") or "someone"
        return f"Run {run.pk} is waiting, already answered ({run.answer.get('decision')} by {who}): it resumes."
    if run.status in Run.TERMINAL:
        return f"Run {run.pk} is {run.status}: there is no question to answer."
    return ""


@require_POST
@page_for(BOARD)
def task_answer(request, task_id: int):
    """Answer, from a task's run box, the question its session waits on: product owners answer the
    agent where they see the card, without the engineers' session page. The same service as there."""
    task = _or_404(page_selectors.task_get, task_id=task_id)
    answer = request.POST.get("answer", "")
    box = page_selectors.task_run_box(task=task)
    error = _answer_refusal(
        box, session_id=request.POST.get("session", ""), question_seq=request.POST.get("question", "")
    )
    if not error:
        try:
            session_answer_input(
                actor=Actor(user=request.user),
                session=box.waiting,
                answer=answer,
                decision=request.POST.get("decision", ""),
                form=elicitation_form_values(request.POST),
                suggestion=request.POST.get("suggestion"),  # an "Always allow ..." button
                question_seq=request.POST.get("question", ""),  # checked again under the session's lock
            )
        except DomainError as exc:
            error = exc.message
    if not request.htmx:
        (messages.error if error else messages.success)(request, error or "Answer sent; the agent goes on.")
        return redirect("board:task", task_id=task.pk)
    box = page_selectors.task_run_box(task=task, error=error, answer=answer if error else "", answered=not error)
    return render(request, "runners/_task_run.html", _box_context(request, box))


@require_GET
@page_for(ENGINEERING)
def session_run(request, session_id: str):
    """The session page's run line, polled while the run is active."""
    context = {"run": page_selectors.session_run(session_id=session_id), "may_run": _may_run(request)}
    return render(request, "runners/_session_run.html", context)
