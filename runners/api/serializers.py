import json

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from board.api.resume_serializers import ResumeOutput
from config.api.exceptions import first_message
from config.api.fields import StrictSerializer
from config.api.parsers import INT64_MAX
from config.api.redacted_fields import RedactedCharField
from runners.models import Run, Runner
from workspaces.models import Repository

PROVIDER_PATTERN = r"^[A-Za-z0-9._-]{1,64}\Z"


class RunOutput(serializers.ModelSerializer):
    task = serializers.PrimaryKeyRelatedField(read_only=True)
    session = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    runner = serializers.SlugRelatedField(slug_field="name", read_only=True, allow_null=True)
    resumes = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    agent = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True, help_text="The agent that works it: <provider>-at-<runner>."
    )
    summary = serializers.DictField(
        read_only=True, help_text="What it produced: commits_ahead, files_changed, patch, artifacts ({} until it ends)."
    )
    waiting_for = serializers.DictField(
        read_only=True,
        help_text="Status waiting: what it waits for: kind (permission, policy, budget), question, question_seq, "
        "tool_use_id, tool_name, runner (the one holding its worktree); {} when it never waited.",
    )
    answer = serializers.DictField(
        read_only=True,
        help_text="The person's answer to what it waited for: decision, message, answered_by; {} until then.",
    )

    class Meta:
        model = Run
        fields = [
            "id",
            "task",
            "session",
            "runner",
            "provider",
            "kind",
            "agent",
            "agent_session",
            "prompt",
            "workdir",
            "status",
            "attempt",
            "pid",
            "sandboxed",
            "exit_code",
            "error",
            "summary",
            "started_at",
            "ended_at",
            "lease_expires_at",
            "cancel_requested_at",
            "log_path",
            "resumes",
            "waiting_for",
            "answer",
            "answered_at",
            "created_at",
            "updated_at",
        ]


class RunAnswerInput(StrictSerializer):
    decision = serializers.ChoiceField(choices=["allow", "deny"], help_text="Allow the deferred tool call, or deny it.")
    message = RedactedCharField(
        required=False, default="", allow_blank=True, max_length=20_000, help_text="Told to the agent with it."
    )


class RunQueueInput(StrictSerializer):
    provider = serializers.RegexField(
        PROVIDER_PATTERN,
        max_length=64,
        trim_whitespace=False,  # " claude" breaks the documented pattern, so it is refused, not trimmed
        help_text="The provider to start, as the runners name it (claude, codex, gemini, shell, demo...).",
    )
    prompt = RedactedCharField(
        required=False,
        allow_blank=True,
        max_length=100_000,
        help_text="What the agent is asked; default: the task's title and description.",
    )


INT32_MAX = 2**31 - 1
SUMMARY_MAX_BYTES = 64 * 1024


class RunDetailOutput(RunOutput):
    """A run with who works it and how it ended (what the runner endpoints answer)."""

    agent = serializers.SlugRelatedField(slug_field="slug", read_only=True, allow_null=True)

    class Meta(RunOutput.Meta):
        fields = [*RunOutput.Meta.fields, "agent", "error", "summary"]


class RunnerOutput(serializers.ModelSerializer):
    agent = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Runner
        fields = [
            "name",
            "agent",
            "host",
            "labels",
            "providers",
            "capacity",
            "version",
            "status",
            "last_seen_at",
            "room",
            "memory",
            "load",
        ]


class HeldRunReport(StrictSerializer):
    id = serializers.IntegerField(min_value=1, max_value=INT64_MAX)
    attempt = serializers.IntegerField(min_value=1, max_value=INT32_MAX)
    pid = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=INT32_MAX)
    alive = serializers.BooleanField(required=False)


class ChangeReport(StrictSerializer):
    code = serializers.CharField(
        max_length=2, trim_whitespace=False, help_text='Porcelain status letters, e.g. " M", "??".'
    )
    path = serializers.CharField(max_length=4096, trim_whitespace=False)


class RecentFileReport(StrictSerializer):
    path = serializers.CharField(max_length=4096, trim_whitespace=False)
    age_seconds = serializers.IntegerField(min_value=0, max_value=INT32_MAX)


class WorktreeReport(StrictSerializer):
    """One worktree folder beside one of this runner's clones, as git sees it on the runner's machine."""

    path = serializers.CharField(max_length=4096, trim_whitespace=False)
    head = serializers.CharField(required=False, allow_blank=True, max_length=64)
    commits_ahead = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=INT32_MAX)
    uncommitted = serializers.IntegerField(required=False, default=0, min_value=0, max_value=INT32_MAX)
    changes = ChangeReport(many=True, required=False, max_length=200)
    recent_files = RecentFileReport(many=True, required=False, max_length=20)


class JsonNumberField(serializers.FloatField):
    """A JSON number only: DRF's FloatField would take "5" and true."""

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


MEMORY_MB_MAX = 1 << 24  # 16 TB
ROOM_MAX = 10_000


def _provider_numbers(maximum: int) -> dict:
    """The schema of ``{"<provider>": <whole number>}`` (the generic DictField would say any JSON)."""
    return {
        "type": "object",
        "additionalProperties": {"type": "integer", "minimum": 0, "maximum": maximum},
        "propertyNames": {"pattern": "^[A-Za-z0-9._-]{1,64}$"},
        "maxProperties": 100,
    }


@extend_schema_field(_provider_numbers(ROOM_MAX))
class RoomField(serializers.DictField):
    """``{"<provider>": <runs>}``: how many more runs of each provider its machine's memory takes now."""

    maximum = ROOM_MAX
    not_whole = "Each provider's room must be a whole number of runs."

    def __init__(self, **kwargs):
        super().__init__(child=serializers.IntegerField(min_value=0, max_value=self.maximum), **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, dict):
            self.fail("not_a_dict", input_type=type(data).__name__)
        if len(data) > 100:
            raise serializers.ValidationError("At most 100 providers.")
        bad = [name for name in data if not RegexValidator(PROVIDER_PATTERN).regex.match(name)]
        if bad:
            raise serializers.ValidationError(
                f"{bad[0][:64]!r} is not a provider name (letters, digits, '.', '_', '-')."
            )
        if any(isinstance(value, bool) or not isinstance(value, int) for value in data.values()):
            raise serializers.ValidationError(self.not_whole)
        return super().to_internal_value(data)


ROOM_HELP = (
    'How many more runs of each provider its memory takes now, e.g. {"claude": 0, "demo": 40}: the server '
    "hands out no more than that (a provider left out has no room). Absent or null: no limit but capacity."
)


@extend_schema_field(_provider_numbers(MEMORY_MB_MAX))
class NeedsField(RoomField):
    """``{"<provider>": <MB>}``: what one run of each provider takes."""

    maximum = MEMORY_MB_MAX
    not_whole = "Each provider's memory_mb must be a whole number of MB."


class MemoryReport(StrictSerializer):
    available_mb = serializers.IntegerField(min_value=0, max_value=MEMORY_MB_MAX, help_text="MemAvailable.")
    total_mb = serializers.IntegerField(min_value=0, max_value=MEMORY_MB_MAX, help_text="MemTotal.")
    min_free_mb = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=MEMORY_MB_MAX, help_text="What it leaves to the machine."
    )
    reserved_mb = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=MEMORY_MB_MAX, help_text="Held for runs just started."
    )
    needs_mb = NeedsField(
        required=False,
        default=dict,
        help_text="Each provider's memory_mb: what one run of it takes.",
    )

    def validate(self, attrs):
        if attrs["available_mb"] > attrs["total_mb"]:
            raise serializers.ValidationError({"available_mb": ["Must not exceed total_mb."]})
        if len(attrs["needs_mb"]) > 100:
            raise serializers.ValidationError({"needs_mb": ["At most 100 providers."]})
        return attrs


class InstanceField(serializers.RegexField):
    """The runner process that asks (a new value each start), on its heartbeat and its polls."""

    def __init__(self, **kwargs):
        super().__init__(
            r"^[A-Za-z0-9_.-]+$",
            max_length=64,
            trim_whitespace=False,
            help_text="Names this runner process (a new value each start). A long poll that a process since "
            "restarted left open on the server hands out nothing once another instance has spoken: its answer "
            "would go nowhere.",
            **kwargs,
        )


class HeartbeatInput(StrictSerializer):
    """Every field is optional; what is sent replaces the runner's (but for labels: see there)."""

    host = serializers.CharField(required=False, allow_blank=True, max_length=255)
    labels = serializers.ListField(
        child=serializers.CharField(max_length=100),
        required=False,
        max_length=100,
        help_text="Ignored: a runner's labels are those its key was made with (create_runner_key --label); "
        "the answer's runner.labels shows them.",
    )
    providers = serializers.ListField(
        child=serializers.RegexField(PROVIDER_PATTERN, max_length=64, trim_whitespace=False),
        required=False,
        max_length=100,
        help_text='The providers it offers, e.g. ["claude", "demo"].',
    )
    capacity = serializers.IntegerField(required=False, min_value=1, max_value=10_000)
    version = serializers.CharField(required=False, allow_blank=True, max_length=64)
    instance = InstanceField(required=False)
    draining = serializers.BooleanField(required=False, help_text="Finish the runs held; take no new ones.")
    runs = HeldRunReport(many=True, required=False, help_text="The runs the runner believes it holds.")
    room = RoomField(required=False, allow_null=True, help_text=ROOM_HELP)
    memory = MemoryReport(required=False, allow_null=True, help_text="Its machine's memory, in MB.")
    load = JsonNumberField(required=False, allow_null=True, min_value=0, max_value=1e6, help_text="1-minute load.")
    worktrees = WorktreeReport(
        many=True,
        required=False,
        max_length=1000,
        help_text="Every worktree folder beside the clones this runner holds (sent now and then, not every beat); "
        "the active ones it leaves out are shown as missing.",
    )


class HeldRunOutput(serializers.Serializer):
    id = serializers.IntegerField()
    attempt = serializers.IntegerField()
    status = serializers.CharField()
    cancel = serializers.BooleanField(help_text="A person asked it to stop.")
    session = serializers.CharField(allow_null=True)
    provider = serializers.CharField()


class RemovalOutput(serializers.Serializer):
    id = serializers.IntegerField()
    path = serializers.CharField()
    force = serializers.BooleanField(help_text="Removed with force: uncommitted changes go too.")


class RunnerRepositoryInput(StrictSerializer):
    name = serializers.CharField(max_length=100, help_text="A slug, unique across Switchyard.")
    path = serializers.CharField(
        max_length=4096, trim_whitespace=False, help_text="The clone's absolute real path on the runner's machine."
    )
    default_branch = serializers.CharField(max_length=255, required=False, default="main")


class RunnerRepositoryOutput(serializers.ModelSerializer):
    runner = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Repository
        fields = ["id", "name", "path", "default_branch", "sync_dir", "runner", "created_at"]


class RunnerWorktreeInput(StrictSerializer):
    repository = serializers.IntegerField(min_value=1, max_value=INT64_MAX, help_text="One of this runner's clones.")
    type = serializers.CharField(max_length=32, help_text="A slug; folder and branch are `<type>-<name>`.")
    name = serializers.CharField(max_length=64, help_text="A slug, e.g. the task's id.")


class HeartbeatOutput(serializers.Serializer):
    runner = RunnerOutput()
    lease_seconds = serializers.IntegerField()
    heartbeat_seconds = serializers.IntegerField()
    held = HeldRunOutput(many=True, help_text="Every active run this runner holds, as the server sees it.")
    cancel = serializers.ListField(child=serializers.IntegerField(), help_text="Held runs to stop.")
    dropped = serializers.ListField(
        child=serializers.IntegerField(), help_text="Runs reported that it no longer holds (ended, or another attempt)."
    )
    remove_worktrees = RemovalOutput(
        many=True, help_text="Worktrees it reported that were removed here: it removes their folders."
    )


class NextInput(StrictSerializer):
    wait = JsonNumberField(
        required=False, default=25, min_value=0, max_value=30, help_text="Seconds to wait for work; 0 answers at once."
    )
    room = RoomField(required=False, allow_null=True, help_text=ROOM_HELP)
    instance = InstanceField(required=False)


class RepositoryBrief(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    path = serializers.CharField(help_text="The clone's path on its host.")
    default_branch = serializers.CharField()
    runner = serializers.CharField(
        allow_null=True,
        help_text="The runner whose machine holds the clone (it makes the worktree); null: the server's.",
    )


class AssignedTaskOutput(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    type = serializers.CharField(allow_blank=True, help_text="From a `type:<slug>` label; '' when none.")
    labels = serializers.ListField(child=serializers.CharField())
    repository = RepositoryBrief(allow_null=True)


class ResumesOutput(serializers.Serializer):
    id = serializers.IntegerField()
    session = serializers.CharField(allow_null=True)
    provider = serializers.CharField()
    runner = serializers.CharField(allow_null=True, help_text="The runner that ran it (where its session is).")
    workdir = serializers.CharField(allow_blank=True)
    agent_session = serializers.CharField(
        allow_blank=True, help_text="kind continue: the provider's session id to resume ('' when unknown)."
    )


class DeferredOutput(serializers.Serializer):
    tool_use_id = serializers.CharField(allow_blank=True, help_text="The tool call its agent deferred.")
    tool_name = serializers.CharField(allow_blank=True)
    kind = serializers.CharField(allow_blank=True, help_text="What was asked: permission, policy or budget.")
    decision = serializers.ChoiceField(choices=["allow", "deny"], help_text="The person's answer.")
    message = serializers.CharField(allow_blank=True, help_text="What the person said with it.")
    answered_by = serializers.CharField(allow_blank=True)
    agent_session = serializers.CharField(allow_blank=True, help_text="The provider's session to resume.")
    workdir = serializers.CharField(allow_blank=True, help_text="Where it worked (on this runner).")
    log_path = serializers.CharField(
        allow_blank=True, help_text="Its job log under the runner's root: the resumed agent's output goes on there."
    )


class AssignmentOutput(serializers.Serializer):
    id = serializers.IntegerField()
    attempt = serializers.IntegerField()
    provider = serializers.CharField()
    prompt = serializers.CharField(allow_blank=True)
    kind = serializers.ChoiceField(
        choices=Run.Kind.choices,
        help_text="work: a fresh session; continue: resume `resumes`' agent session with the prompt; review: read "
        "the change and comment, never commit.",
    )
    task = AssignedTaskOutput()
    resumes = ResumesOutput(allow_null=True)
    deferred = DeferredOutput(
        allow_null=True,
        help_text="A waiting run answered (issue 26 §2): resume `agent_session` and answer the deferred tool call's "
        "PreToolUse with `decision`; null otherwise.",
    )


class NextOutput(serializers.Serializer):
    runs = AssignmentOutput(many=True)
    cancel = serializers.ListField(child=serializers.IntegerField(), help_text="Held runs to stop.")


SUMMARY_SHAPE = (
    '{"commits_ahead": an integer >= 0 or null, "files_changed": [file names], "patch": a file name of the '
    'session\'s files, "artifacts": [file names]}, each key optional'
)
# What the pages put in a link to the session's files: a control character there breaks the link.
NO_CONTROL_CHARACTERS = RegexValidator(r"^[^\x00-\x1f\x7f]*\Z", "No control characters.")


def _summary_name(**kwargs) -> serializers.CharField:
    return serializers.CharField(max_length=4096, trim_whitespace=False, validators=[NO_CONTROL_CHARACTERS], **kwargs)


class RunSummaryInput(StrictSerializer):
    """A finished run's summary (runners/run_lifecycle.py summary_text reads it; the pages link its patch).
    Checked here: a wrong shape ({"files_changed": 5}) would fail the run's end with a 500, every time
    the runner reported it, and the run could never end."""

    commits_ahead = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=INT32_MAX)
    files_changed = serializers.ListField(
        child=serializers.CharField(max_length=4096, trim_whitespace=False), required=False, max_length=10_000
    )
    patch = _summary_name(required=False)
    artifacts = serializers.ListField(child=_summary_name(), required=False, max_length=10_000)

    def run_validation(self, data=empty):
        try:
            value = super().run_validation(data)
        except serializers.ValidationError as exc:
            raise serializers.ValidationError(f"{first_message(exc.detail)} Expected {SUMMARY_SHAPE}.") from None
        if len(json.dumps(value, ensure_ascii=False).encode()) > SUMMARY_MAX_BYTES:
            raise serializers.ValidationError(f"At most {SUMMARY_MAX_BYTES} bytes of JSON.")
        return value


class DeferredReport(StrictSerializer):
    tool_use_id = serializers.RegexField(
        r"^[A-Za-z0-9._:-]*$", max_length=200, help_text="The deferred call's id (Claude Code's tool_use id)."
    )
    tool_name = serializers.CharField(max_length=200, allow_blank=True, required=False, default="")


class RunStatusInput(StrictSerializer):
    attempt = serializers.IntegerField(min_value=1, max_value=INT32_MAX, help_text="The attempt the runner holds.")
    status = serializers.ChoiceField(choices=["starting", "running", "waiting", "succeeded", "failed", "cancelled"])
    deferred = DeferredReport(
        required=False,
        help_text="-> waiting: the tool call its agent deferred to a person (the result's deferred_tool_use).",
    )
    pid = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=INT32_MAX)
    sandboxed = serializers.BooleanField(required=False, help_text="-> running: its agent runs in a sandbox.")
    exit_code = serializers.IntegerField(required=False, allow_null=True, min_value=-INT32_MAX - 1, max_value=INT32_MAX)
    workdir = serializers.CharField(required=False, allow_blank=True, max_length=1000, trim_whitespace=False)
    log_path = serializers.CharField(required=False, allow_blank=True, max_length=1000, trim_whitespace=False)
    error = RedactedCharField(
        required=False,
        allow_blank=True,
        max_length=10_000,
        help_text="Why it failed: exit code, last lines of the log.",
    )
    summary = RunSummaryInput(required=False, help_text="What it produced: " + SUMMARY_SHAPE + ".")
    agent_session = serializers.RegexField(
        r"^[A-Za-z0-9._:-]*$",
        required=False,
        max_length=200,
        help_text="The provider's own session id (Claude Code's session, Codex's thread), once the runner knows it.",
    )


class RunStatusOutput(serializers.Serializer):
    run = RunDetailOutput()
    attempt = serializers.IntegerField(required=False, help_text="-> starting: the attempt to use from now on.")
    session = serializers.CharField(required=False, help_text="-> starting: the run's session.")
    agent_key = serializers.CharField(
        required=False, help_text="-> starting: the per-run agent key for the agent's environment; shown once."
    )
    resume = ResumeOutput(
        required=False, allow_null=True, help_text="-> starting: what to resume from (a restart, or the run resumed)."
    )


class RunLogOutput(serializers.Serializer):
    offset = serializers.IntegerField(help_text="The log's size now: where the next chunk starts.")
