"""The task's change, its comments and review (SPEC §10). People (staff and the board's groups, signed
in), an ``orchestrate`` key and the task's own run keys read; people and ``orchestrate`` keys decide."""

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from board import selectors as board_selectors
from config.api.errors import DomainError
from config.api.renderers import FastJSONRenderer
from config.api.views import actor_from_request, validate_input
from config.pages import BOARD
from runners import review
from runners.api import review_serializers as s
from runners.models import TaskReview
from runners.task_diff import DIFF_MAX_BYTES, DIFF_MAX_FILE_BYTES, DIFF_MAX_FILES, task_change
from runners.task_diff_json import EncodedChange, task_change_encoded

_CHANGE_409 = OpenApiResponse(
    description="No change to read: the task has no repository or no branch yet, or its clone is on a runner."
)


def _change_json(change: EncodedChange, latest: TaskReview | None) -> dict:
    return {
        "task": change.task_id,
        "repository": change.repository,
        "branch": change.branch,
        "head": change.head_commit,
        "base": {"branch": change.base_branch, "commit": change.base_commit, "how": "merge-base"},
        "totals": change.totals,
        "review": None
        if latest is None
        else {
            "decision": latest.decision,
            "reviewer": latest.reviewer,
            "head_commit": latest.head_commit,
            "current": latest.head_commit == change.head_commit,
            "created_at": latest.created_at,
        },
        "files": change.files,
    }


class TaskDiffView(APIView):
    allowed_groups = BOARD

    def perform_content_negotiation(self, request, force=False):
        # The format is the view's own choice (?format=); errors are always JSON, like every 4xx. A change's
        # JSON is the API's largest answer: encoded by orjson (config/api/renderers.py).
        renderer = FastJSONRenderer()
        return renderer, renderer.media_type

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "format",
                str,
                enum=["diff", "json"],
                required=False,
                description="diff (the default): the unified diff; json: files with their hunks.",
            )
        ],
        responses={
            (200, "text/x-diff"): OpenApiTypes.STR,
            (200, "application/json"): s.TaskDiffOutput,
            409: _CHANGE_409,
        },
        summary="The task's change: its branch against its base, every run's commits together",
        description="The task branch (`<type>-<task>`) against the merge-base with the repository's default branch "
        "(the base: where the branch left it), as a unified diff (`text/x-diff`) or, with `?format=json`, files with "
        "status, additions, deletions and hunks. A binary file, a file over "
        f"{DIFF_MAX_FILE_BYTES} bytes, the files past the first {DIFF_MAX_FILES} and those past {DIFF_MAX_BYTES} "
        "bytes in all are summarised (`too_large`, no hunks; in the unified diff, a `# path: why` line before the "
        "first file). For people, an `orchestrate` key and the task's own run keys; a task whose clone is on a "
        "runner is a 409 naming the runner.",
    )
    def get(self, request, task_id: int):
        actor = actor_from_request(request)
        shape = request.query_params.get("format") or "diff"
        if shape not in ("diff", "json"):
            raise DomainError(f"format must be 'diff' or 'json', not {shape[:40]!r}.")
        task = board_selectors.task_get_for_actor(actor=actor, task_id=task_id)
        review.require_change_reader(actor=actor, task=task)
        if shape == "json":
            # Not through TaskDiffOutput (its schema): a serializer per line would cost more than git. The
            # files come encoded (runners/task_diff_json.py).
            change = task_change_encoded(task=task)
            body = FastJSONRenderer().render(_change_json(change, review.review_latest(task=task)))
            return HttpResponse(body, content_type="application/json")
        change = task_change(task=task)
        response = HttpResponse(change.text.encode(), content_type="text/x-diff; charset=utf-8")
        response["X-Content-Type-Options"] = "nosniff"
        return response


class TaskCommentsView(APIView):
    allowed_groups = BOARD

    @extend_schema(responses=s.CommentOutput(many=True), summary="Review comments on the task's change, oldest first")
    def get(self, request, task_id: int):
        actor = actor_from_request(request)
        task = board_selectors.task_get_for_actor(actor=actor, task_id=task_id)
        review.require_change_reader(actor=actor, task=task)
        return Response(s.CommentOutput(review.comment_list(task=task), many=True).data)

    @extend_schema(
        request=s.CommentInput,
        responses={
            201: s.CommentOutput,
            400: OpenApiResponse(description="The path is not a file of the change, or the line not in its diff."),
            409: _CHANGE_409,
        },
        summary="Comment on a line (or a whole file) of the task's change (a person, or a review run's key)",
    )
    def post(self, request, task_id: int):
        actor = actor_from_request(request)
        task = board_selectors.task_get_for_actor(actor=actor, task_id=task_id)
        review.require_change_reader(actor=actor, task=task)
        data = validate_input(s.CommentInput, request.data)
        comment = review.comment_create(
            actor=actor, task=task, path=data["path"], line=data.get("line"), body=data["body"]
        )
        return Response(s.CommentOutput(comment).data, status=201)


class TaskReviewView(APIView):
    allowed_groups = BOARD

    @extend_schema(
        request=s.ReviewInput,
        responses={
            201: s.ReviewOutput,
            400: OpenApiResponse(description="A comment on a path or line not in the diff, or a bad body."),
            409: OpenApiResponse(description="The task has no run, no branch, or a run still going."),
        },
        summary="Approve the task's change, request changes, or ask an agent to review it (people and 'orchestrate' keys)",
        description='`{"decision": "approve"}` marks the change approved (who, when, on which head). '
        '`{"decision": "request_changes", "message": ..., "comments": [{"path", "line", "body"}]}` queues a run '
        "that continues the latest run's agent session on the same branch (its provider's resume) with the message "
        'and comments as its prompt; with `"provider"`, a fresh session of that provider on the same branch. '
        '`{"decision": "ask_review", "provider": ..., "message": ...}` queues a review run of that provider: it gets '
        "the branch and the diff (or how to fetch it), may not commit (a commit fails the run and is taken off the "
        "branch), and comments through `POST /tasks/{id}/comments/` with its run key; it is no verdict (the diff's "
        "`review` stays the newest approve or request_changes). "
        "approve takes no message, comments or provider; request_changes needs a message or comments (400). "
        "Agent and run keys are refused (403).",
    )
    def post(self, request, task_id: int):
        actor = actor_from_request(request)
        task = board_selectors.task_get_for_actor(actor=actor, task_id=task_id)
        review.require_reviewer(actor=actor, task=task)
        data = validate_input(s.ReviewInput, request.data)
        made = review.task_review(
            actor=actor,
            task=task,
            decision=data["decision"],
            message=data.get("message", ""),
            comments=[dict(c) for c in data.get("comments", [])],
            provider=data.get("provider"),
        )
        made = TaskReview.objects.select_related("run__runner", "run__agent").get(pk=made.pk)
        return Response(s.ReviewOutput(made).data, status=201)
