"""Ship a task's change (SPEC §10): merge it into the default branch, ask the agent to resolve a
conflict, push it and open a pull request. People (staff and the board's groups) and ``orchestrate``
keys; an agent's or a run's key is refused (403) with nothing changed."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from board import selectors as board_selectors
from config.api.errors import DomainError
from config.api.views import actor_from_request, validate_input
from config.pages import BOARD
from runners import ship_merge, ship_pull_request
from runners.api import ship_serializers as s
from runners.api.serializers import RunOutput
from runners.models import Run


class TaskMergeView(APIView):
    allowed_groups = BOARD

    @extend_schema(
        request=s.MergeInput,
        responses={
            200: s.MergeOutput,
            400: OpenApiResponse(description="A bad strategy or body."),
            403: OpenApiResponse(
                description="An agent's or a run's key, another team's task, or force by a non-staff."
            ),
            409: OpenApiResponse(
                response=s.MergeConflictOutput,
                description="A conflict (the files named, nothing changed), not approved, no branch, no run, a run "
                "still going, already merged, a dirty checkout of the default branch, or a runner's repository.",
            ),
        },
        summary="Merge the task's branch into the repository's default branch (people and 'orchestrate' keys)",
        description="Merges `<type>-<task>` into the default branch of a repository on the server, in the request: "
        "the merge is computed in git's object store (`merge-tree`), then the branch moves in one step, so a "
        "conflict leaves everything as it was (409 with `files`). The task then goes to Done and its worktree's "
        "claims end. The change must be approved on its current head unless `force` (staff only). A repository on "
        f"a runner is a 409: {ship_merge.RUNNER_HOSTED}.",
    )
    def post(self, request, task_id: int):
        actor = actor_from_request(request)
        task = board_selectors.task_get_for_actor(actor=actor, task_id=task_id)
        ship_merge.require_merger(actor=actor, task=task)
        data = validate_input(s.MergeInput, request.data)
        if data["force"] and not actor.is_staff:
            raise DomainError(
                "force (merging a change that is not approved) is for staff by API; others approve first, "
                "or confirm on the board.",
                code="forbidden",
            )
        result = ship_merge.task_merge(actor=actor, task=task, strategy=data["strategy"], force=data["force"])
        return Response(
            {
                "message": result.message,
                "task": result.task.pk,
                "status": result.task.status,
                "strategy": result.strategy,
                "branch": result.branch,
                "default_branch": result.default_branch,
                "commit": result.commit,
                "previous": result.previous,
                "head": result.head,
                "forced": result.forced,
            }
        )


class TaskMergeResolveView(APIView):
    allowed_groups = BOARD

    @extend_schema(
        request=None,
        responses={
            201: RunOutput,
            403: OpenApiResponse(description="An agent's or a run's key, or another team's task."),
            409: OpenApiResponse(description="No conflict now, no run to continue, a run still going, no branch."),
        },
        summary="Ask the agent to resolve the task's merge conflict: a run whose prompt names the files",
    )
    def post(self, request, task_id: int):
        actor = actor_from_request(request)
        task = board_selectors.task_get_for_actor(actor=actor, task_id=task_id)
        run = ship_merge.task_merge_resolve_run(actor=actor, task=task)
        run = Run.objects.select_related("runner", "agent").get(pk=run.pk)
        return Response(RunOutput(run).data, status=201)


class TaskPullRequestView(APIView):
    allowed_groups = BOARD

    @extend_schema(
        request=None,
        responses={
            200: s.PullRequestResultOutput,
            403: OpenApiResponse(description="An agent's or a run's key, or another team's task."),
            409: OpenApiResponse(
                description="No branch, no run, a run still going, no such remote, the push refused, GitHub "
                "refusing the token, its rate limit, or GitHub unreachable: the message says which. The failure is "
                "kept for the card; the task and the branch are as they were."
            ),
        },
        summary="Push the task's branch to the repository's remote and open a GitHub pull request",
        description="Pushes `<type>-<task>` to the remote named in the repository's shipping settings (else "
        "`origin`). With a GitHub token set and a github.com remote (or an owner/name in the settings) it opens a "
        "pull request into the default branch, or links the one already open for the branch; beat then follows its "
        f"state (open, merged, closed). A repository on a runner is a 409: {ship_pull_request.RUNNER_HOSTED}.",
    )
    def post(self, request, task_id: int):
        actor = actor_from_request(request)
        task = board_selectors.task_get_for_actor(actor=actor, task_id=task_id)
        row, message = ship_pull_request.task_pull_request(actor=actor, task=task)
        return Response({"message": message, "pull_request": s.PullRequestOutput(row).data})
