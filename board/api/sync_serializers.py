from django.core.validators import RegexValidator
from rest_framework import serializers

from board.models import SyncIssue
from board.sync.files import SESSION_DIR_RE
from config.api.fields import StrictSerializer

# board.sync.files.SESSION_DIR_RE, ending at the very end (its $ also takes a trailing newline).
SESSION_KEY_PATTERN = SESSION_DIR_RE.pattern.removesuffix("$") + r"\Z"
SESSION_KEY_MESSAGE = "Not a session folder name: session-<letters, digits, '-', '_'>."
SESSION_HELP = "A session folder under STATE_DIR, e.g. session-1770537842. Omit (or null) to sync every session."


class SessionKeyField(serializers.CharField):
    """A session folder name, exactly as sent (not trimmed), so the schema's pattern is the whole rule."""

    def __init__(self, **kwargs):
        kwargs.setdefault("max_length", 128)
        kwargs.setdefault("help_text", SESSION_HELP)
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)
        self.validators.append(RegexValidator(SESSION_KEY_PATTERN, SESSION_KEY_MESSAGE))


class SyncRequestInput(StrictSerializer):
    session = SessionKeyField(required=False, allow_null=True, default=None)


class SyncQueuedOutput(serializers.Serializer):
    task_id = serializers.CharField(help_text="The Celery task id of the queued run.")
    session = serializers.CharField(allow_null=True)
    # A plain string in the schema: an enum named after "status" would collide with the tasks'.
    status = serializers.CharField(help_text='Always "queued": the run happens in a worker.')


class KeptOutput(serializers.Serializer):
    path = serializers.CharField()
    problem = serializers.CharField()


class SyncReportOutput(serializers.Serializer):
    session_key = serializers.CharField(allow_null=True)
    sessions = serializers.IntegerField()
    files = serializers.IntegerField()
    unchanged = serializers.IntegerField(help_text="Skipped: same size and mtime as when last synced.")
    read = serializers.IntegerField()
    synced = serializers.IntegerField()
    rechecked = serializers.IntegerField(help_text="Touched, same content: only the signature was refreshed.")
    deferred = serializers.IntegerField(help_text="Half-written files left for the next run.")
    job_logs_read = serializers.IntegerField()
    sessions_created = serializers.IntegerField()
    sessions_updated = serializers.IntegerField()
    agents_created = serializers.IntegerField()
    tasks_created = serializers.IntegerField()
    tasks_moved = serializers.IntegerField()
    tasks_updated = serializers.IntegerField()
    tasks_failed_from_logs = serializers.IntegerField()
    issues_opened = serializers.IntegerField()
    issues_seen_again = serializers.IntegerField()
    issues_resolved = serializers.IntegerField()
    fields_kept = serializers.IntegerField(help_text="Fields kept because the file's value was not understood.")
    kept = KeptOutput(many=True, help_text="The first 100 of them.")
    seconds = serializers.FloatField()


class SyncIssueOutput(serializers.ModelSerializer):
    # A plain string in the schema: an enum named after "source" would collide with the artifacts'.
    source = serializers.CharField(help_text="state (STATE_DIR/session-*/…json) or job_log (LOGS_ROOT/running-jobs/…).")

    class Meta:
        model = SyncIssue
        fields = [
            "id",
            "path",
            "source",
            "session_key",
            "error",
            "first_seen_at",
            "last_seen_at",
            "occurrences",
            "resolved_at",
        ]


class MissingFileOutput(serializers.Serializer):
    path = serializers.CharField()
    session = serializers.CharField()
    external_id = serializers.CharField(help_text="The task it made; empty for orchestrator.json (the session).")
    db_status = serializers.CharField(help_text="What the database holds now; empty if nothing.")
    last_synced_at = serializers.DateTimeField()


class UnsyncedFileOutput(serializers.Serializer):
    path = serializers.CharField()
    session = serializers.CharField()
    reason = serializers.ChoiceField(choices=["new", "changed", "issue"])
    error = serializers.CharField(help_text="The open sync issue's error, if any.")


class StatusMismatchOutput(serializers.Serializer):
    path = serializers.CharField()
    session = serializers.CharField()
    external_id = serializers.CharField()
    file_status = serializers.CharField()
    db_status = serializers.CharField()


class SyncDriftOutput(serializers.Serializer):
    session_key = serializers.CharField(allow_null=True)
    files = serializers.IntegerField()
    missing_files = MissingFileOutput(many=True)
    unsynced_files = UnsyncedFileOutput(many=True)
    status_mismatches = StatusMismatchOutput(many=True)
    open_issues = serializers.IntegerField()
