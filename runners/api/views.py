from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.generics import ListAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from board import selectors as board_selectors
from board.api.resume_serializers import resume_body
from board.services import require_orchestrator
from config.api.errors import DomainError
from config.api.fields import StrictSerializer
from config.api.parsers import INT64_MAX
from config.api.permissions import ANY_SCOPE, RUNNER_SCOPES
from config.api.schema import lease_lost_response
from config.api.views import actor_from_request, validate_input
from runners import selectors, services
from runners.api import serializers as s
from runners.api.filters import RunFilter
from runners.dispatch import runner_next
from runners.heartbeat import runner_heartbeat
from runners.identities import runner_for_actor
from runners.log_shipping import run_log_append
from runners.run_lifecycle import run_report
from runners.run_waiting import run_requeue_elsewhere, run_stop, run_waiting_answer
from workspaces.api.worktree_serializers import WorktreeOutput
from workspaces.files.uploads import read_chunks
from workspaces.worktrees import selectors as worktree_selectors
from workspaces.worktrees.runner_hosted import repository_register_on_runner, worktree_register_on_runner


class TaskRunQueueView(APIView):
    @extend_schema(
        request=s.RunQueueInput,
        responses={201: s.RunOutput, 409: OpenApiResponse(description="The task already has an active run.")},
        summary="Queue a run of a provider on this task (staff or an orchestrating agent)",
    )
    def post(self, request, task_id: int):
        actor = actor_from_request(request)
        require_orchestrator(actor=actor, what="Queueing runs")
        data = validate_input(s.RunQueueInput, request.data)
        task = board_selectors.task_get(task_id=task_id)
        run = services.run_queue(actor=actor, task=task, provider=data["provider"], prompt=data.get("prompt"))
        return Response(s.RunOutput(selectors.run_get(run_id=run.pk)).data, status=201)


class RunListView(ListAPIView):
    allowed_scopes = ANY_SCOPE  # agents, and runners reading runs (SPEC §8)
    serializer_class = s.RunOutput
    filterset_class = RunFilter

    def get_queryset(self):
        return selectors.run_list()

    @extend_schema(summary="List runs, newest first")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)


class RunDetailView(APIView):
    allowed_scopes = ANY_SCOPE  # agents, and runners reading runs (SPEC §8)

    @extend_schema(responses=s.RunOutput, summary="Read a run")
    def get(self, request, run_id: int):
        return Response(s.RunOutput(selectors.run_get(run_id=run_id)).data)


class RunCancelView(APIView):
    @extend_schema(
        request=None,
        responses={200: s.RunOutput, 409: OpenApiResponse(description="The run has already ended.")},
        summary="Stop a run (staff or an orchestrating agent)",
        description="A queued or waiting run is cancelled at once (a waiting one's task given back and its session "
        "cancelled); a run a runner holds gets `cancel_requested_at` "
        "and ends `cancelled` when its runner has stopped the agent. Asking again changes nothing.",
    )
    def post(self, request, run_id: int):
        actor = actor_from_request(request)
        require_orchestrator(actor=actor, what="Cancelling runs")
        validate_input(StrictSerializer, request.data)
        run = run_stop(actor=actor, run=selectors.run_get(run_id=run_id))
        return Response(s.RunOutput(selectors.run_get(run_id=run.pk)).data)


class RunAnswerView(APIView):
    @extend_schema(
        request=s.RunAnswerInput,
        responses={
            200: s.RunOutput,
            409: OpenApiResponse(
                description="The run waits for no answer: it is not waiting, or was answered already (its state named)."
            ),
        },
        summary="Answer what a waiting run waits for (staff or an orchestrating agent)",
        description="The run's session's question (a permission, the tool policy's ask, an exceeded budget) gets "
        "Allow or Deny, as on the session page or the card; the run then resumes on the runner holding its "
        "worktree, the decision applied to the tool call its agent deferred.",
    )
    def post(self, request, run_id: int):
        actor = actor_from_request(request)
        require_orchestrator(actor=actor, what="Answering runs")
        data = validate_input(s.RunAnswerInput, request.data)
        run = run_waiting_answer(
            actor=actor, run=selectors.run_get(run_id=run_id), decision=data["decision"], message=data["message"]
        )
        return Response(s.RunOutput(selectors.run_get(run_id=run.pk)).data)


class RunRequeueView(APIView):
    @extend_schema(
        request=None,
        responses={
            200: s.RunOutput,
            409: OpenApiResponse(description="The run is not waiting (its status is named)."),
        },
        summary="Re-queue a waiting run for any runner (staff or an orchestrating agent)",
        description="A run waiting for a person whose runner (the one holding its worktree and agent session) is "
        "gone, or not to be waited for: its task, session, worktree claim and key end as at a cancel, and it is "
        "queued again for any runner, attempt + 1, to start afresh (a new session and worktree there).",
    )
    def post(self, request, run_id: int):
        actor = actor_from_request(request)
        require_orchestrator(actor=actor, what="Re-queueing runs")
        validate_input(StrictSerializer, request.data)
        run = run_requeue_elsewhere(actor=actor, run=selectors.run_get(run_id=run_id))
        return Response(s.RunOutput(selectors.run_get(run_id=run.pk)).data)


# --- The runner protocol (SPEC §8): a runner's own key (scope 'run') only -------------------------


class RunnerHeartbeatView(APIView):
    allowed_scopes = RUNNER_SCOPES  # a runner's key; its own runner is checked in the view

    @extend_schema(
        request=s.HeartbeatInput,
        responses=s.HeartbeatOutput,
        summary="A runner's heartbeat: what it reports, the runs it holds, what to stop or drop (runner key)",
        description="What is sent replaces the runner's, but for its labels (those its key was made with: "
        "create_runner_key --label); it goes online (or draining) and the lease of every run it holds is "
        "renewed for RUNNER_LEASE_SECONDS.",
    )
    def post(self, request):
        runner = runner_for_actor(actor=actor_from_request(request))
        data = validate_input(s.HeartbeatInput, request.data)
        beat = runner_heartbeat(runner=runner, report=data)
        return Response(
            {
                "runner": s.RunnerOutput(beat.runner).data,
                "lease_seconds": settings.RUNNER_LEASE_SECONDS,
                "heartbeat_seconds": settings.RUNNER_HEARTBEAT_SECONDS,
                "held": [
                    {
                        "id": run.pk,
                        "attempt": run.attempt,
                        "status": run.status,
                        "cancel": run.cancel_requested_at is not None,
                        "session": run.session_id,
                        "provider": run.provider,
                    }
                    for run in beat.held
                ],
                "cancel": beat.cancel,
                "dropped": beat.dropped,
                "remove_worktrees": [
                    {"id": item.worktree_id, "path": item.path, "force": item.force} for item in beat.remove_worktrees
                ],
            }
        )


class RunnerRepositoryView(APIView):
    allowed_scopes = RUNNER_SCOPES  # a runner's key; its own runner is checked in the view

    @extend_schema(
        request=s.RunnerRepositoryInput,
        responses={
            200: s.RunnerRepositoryOutput,
            201: s.RunnerRepositoryOutput,
            409: OpenApiResponse(
                description="The name is another host's, or the folder is registered by another name."
            ),
        },
        summary="Register a clone on this runner's machine (runner key); 201 when new, 200 when known",
        description="Tasks of this repository then run only on this runner, in worktrees it makes beside the clone "
        "and registers with POST /runners/me/worktrees/. Registering again updates the path and default branch.",
    )
    def post(self, request):
        runner = runner_for_actor(actor=actor_from_request(request))
        data = validate_input(s.RunnerRepositoryInput, request.data)
        repository, created = repository_register_on_runner(runner=runner, **data)
        return Response(s.RunnerRepositoryOutput(repository).data, status=201 if created else 200)


class RunnerWorktreeView(APIView):
    allowed_scopes = RUNNER_SCOPES  # a runner's key; its own runner is checked in the view

    @extend_schema(
        request=s.RunnerWorktreeInput,
        responses={200: WorktreeOutput, 201: WorktreeOutput},
        summary="Register the worktree `<type>-<name>` this runner made beside its clone (runner key)",
        description="201 when new (or a removed one made again), 200 when active already. The run's agent then "
        "claims it with POST /worktrees/{id}/claim/ as any agent does; its status comes with the heartbeat.",
    )
    def post(self, request):
        actor = actor_from_request(request)
        runner = runner_for_actor(actor=actor)
        data = validate_input(s.RunnerWorktreeInput, request.data)
        worktree, created = worktree_register_on_runner(
            actor=actor, runner=runner, repository_id=data["repository"], type=data["type"], name=data["name"]
        )
        worktree = worktree_selectors.worktree_get(worktree_id=worktree.pk)
        return Response(WorktreeOutput(worktree).data, status=201 if created else 200)


class RunnerNextView(APIView):
    allowed_scopes = RUNNER_SCOPES  # a runner's key; its own runner is checked in the view

    @extend_schema(
        request=s.NextInput,
        responses=s.NextOutput,
        summary="Ask for work: a long poll that hands out queued runs up to free capacity (runner key)",
        description="Answers at once when it hands out runs or a held run has a cancel pending; otherwise "
        "looks again about every 100 ms for up to `wait` seconds, then answers empty. Also a heartbeat. "
        "With `room` it hands out no more runs of a provider than the runner's memory takes.",
    )
    def post(self, request):
        actor = actor_from_request(request)
        runner = runner_for_actor(actor=actor)
        data = validate_input(s.NextInput, request.data)
        report = {name: data[name] for name in ("room", "instance") if name in data}
        found = runner_next(actor=actor, runner=runner, wait=data["wait"], report=report)
        return Response({"runs": [_assignment(run) for run in found.runs], "cancel": found.cancel})


def _assignment(run) -> dict:
    task = selectors.run_task_for_assignment(task_id=run.task_id)
    repository = task.repository
    resumes = run.resumes
    return {
        "id": run.pk,
        "attempt": run.attempt,
        "provider": run.provider,
        "prompt": run.prompt,
        "task": {
            "id": task.pk,
            "title": task.title,
            "description": task.description,
            "type": selectors.task_type(task=task),
            "labels": task.labels,
            "repository": None
            if repository is None
            else {
                "id": repository.pk,
                "name": repository.name,
                "path": repository.path,
                "default_branch": repository.default_branch,
                "runner": repository.runner.name if repository.runner_id else None,
            },
        },
        "kind": run.kind,
        "resumes": None
        if resumes is None
        else {
            "id": resumes.pk,
            "session": resumes.session_id,
            "provider": resumes.provider,
            "runner": resumes.runner.name if resumes.runner_id else None,
            "workdir": resumes.workdir,
            # What a continue run resumes (the runner that has it on disk starts the provider's resume).
            "agent_session": selectors.run_agent_session_to_continue(run=run),
        },
        "deferred": _deferred(run),
    }


def _deferred(run) -> dict | None:
    """An answered waiting run handed back to its runner: what it resumes with (run_waiting.py)."""
    if run.answered_at is None or not run.waiting_for:
        return None
    return {
        "tool_use_id": str(run.waiting_for.get("tool_use_id") or ""),
        "tool_name": str(run.waiting_for.get("tool_name") or ""),
        "kind": str(run.waiting_for.get("kind") or ""),
        "decision": run.answer.get("decision"),
        "message": str(run.answer.get("message") or ""),
        "answered_by": str(run.answer.get("answered_by") or ""),
        "agent_session": run.agent_session,
        "workdir": run.workdir,
        "log_path": run.log_path,
    }


class RunStatusView(APIView):
    allowed_scopes = RUNNER_SCOPES  # a runner's key; its own runner is checked in the view

    @extend_schema(
        request=s.RunStatusInput,
        responses={
            200: s.RunStatusOutput,
            409: lease_lost_response(
                "A stale attempt (code lease_lost: the run was handed back or to another runner), a move the "
                "run's state machine does not allow, or a start on a task that moved on (done, or held by another "
                "agent): the run is then ended, failed (cancelled if a stop was asked for), and `run_status` says so."
            ),
        },
        summary="Report a run's status: starting, running, waiting, or how it ended (the holding runner's key)",
        description="-> starting opens the run's session, claims its task for the run's agent and answers a "
        "per-run agent key (shown once) and the resume packet; from starting or running it is a restart "
        "(attempt + 1). -> waiting (with `deferred`): its agent deferred a tool call to a person and exited; the run "
        "waits, holding no capacity, until the session's question is answered (409 when there is none). An end moves the task (succeeded: review; failed: failed) and the session, releases "
        "the claim and revokes the key. The same end reported again with the same attempt is 200.",
    )
    def post(self, request, run_id: int):
        actor = actor_from_request(request)
        if not actor.is_staff:
            runner_for_actor(actor=actor)
        data = validate_input(s.RunStatusInput, request.data)
        run = selectors.run_get(run_id=run_id)
        fields = {
            name: data[name]
            for name in (
                "pid",
                "sandboxed",
                "exit_code",
                "workdir",
                "log_path",
                "error",
                "summary",
                "agent_session",
                "deferred",
            )
            if name in data
        }
        report = run_report(actor=actor, run=run, attempt=data["attempt"], status=data["status"], **fields)
        body = {"run": s.RunDetailOutput(selectors.run_get(run_id=run.pk)).data}
        if report.agent_key is not None:
            body["attempt"] = report.run.attempt
            body["session"] = report.run.session_id
            body["agent_key"] = report.agent_key
            body["resume"] = resume_body(report.resume) if report.resume is not None else None
        return Response(body)


class RunLogView(APIView):
    allowed_scopes = RUNNER_SCOPES
    parser_classes: list = []  # the body is the log's bytes, never parsed

    @extend_schema(
        request={"application/octet-stream": OpenApiTypes.BINARY},
        parameters=[
            OpenApiParameter(
                "offset",
                {"type": "integer", "minimum": 0, "maximum": INT64_MAX},
                required=True,
                description="Where in the run's output the body's first byte sits.",
            ),
            OpenApiParameter(
                "attempt",
                {"type": "integer", "minimum": 1, "maximum": s.INT32_MAX},
                required=True,
                description="The attempt the runner holds.",
            ),
        ],
        responses={
            200: s.RunLogOutput,
            409: lease_lost_response(
                "A stale attempt (code lease_lost), a run without a session yet, or an offset past the log's end "
                "(`offset` in the body says where to resend from)."
            ),
            413: OpenApiResponse(
                description="A body over RUNNER_LOG_CHUNK_MAX_BYTES (64 MiB by default). Declared in its "
                "Content-Length: nothing is stored. Sent chunked: what came before the limit may stay, "
                "unacknowledged, and is skipped when resent."
            ),
        },
        summary="Ship a chunk of a run's output into its session log (the holding runner's key)",
        description="The body is the run's output from byte `offset`, up to RUNNER_LOG_CHUNK_MAX_BYTES (64 MiB by "
        "default), sent with a Content-Length or with Transfer-Encoding: chunked; it is streamed into the log as it "
        "arrives and fsynced once at its end, so a runner ships its whole backlog in one request. Idempotent by "
        "offset: bytes already stored are not appended again, so a chunk is safely resent (also after a client "
        "went away mid-body: what it had sent may be stored, never acknowledged, and is skipped). The answer comes "
        "only once the bytes are fsynced. Also taken just after the run ended (its last chunk).",
    )
    def post(self, request, run_id: int):
        runner = runner_for_actor(actor=actor_from_request(request))
        offset = _int_query(request, "offset", minimum=0, maximum=INT64_MAX)
        attempt = _int_query(request, "attempt", minimum=1, maximum=s.INT32_MAX)
        declared = request.META.get("CONTENT_LENGTH") or ""
        limit = settings.RUNNER_LOG_CHUNK_MAX_BYTES
        if declared.isdigit() and int(declared) > limit:
            raise DomainError(f"A log chunk is at most {limit} bytes.", code="too_large")
        run = selectors.run_get(run_id=run_id)
        # Django's request, not DRF's stream (as the workspace upload: a chunked body would read as
        # empty); on the ASGI server it is fed from the socket while it is read (config/asgi_stream.py).
        chunks = read_chunks(request._request)
        size = run_log_append(runner=runner, run=run, attempt=attempt, offset=offset, chunks=chunks)
        return Response({"offset": size})


def _int_query(request, name: str, *, minimum: int, maximum: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or not raw.isascii() or not raw.isdigit() or not minimum <= int(raw) <= maximum:
        raise DomainError(
            f"{name} must be an integer from {minimum} to {maximum}.", extra={"errors": {name: ["Invalid."]}}
        )
    return int(raw)
