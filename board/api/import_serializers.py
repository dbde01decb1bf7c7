"""Bodies and answers of the import endpoints (priority files, campaign definitions)."""

from rest_framework import serializers

from board.api.serializers import CampaignOutput
from config.api.fields import StrictSerializer


class ImportFileOutput(serializers.Serializer):
    name = serializers.CharField()
    size = serializers.IntegerField(help_text="Bytes.")
    modified_at = serializers.DateTimeField()


def _file_name_pattern(suffix: str) -> str:
    # The names the API is documented for: board/imports/files.py refuses more shapes than a pattern
    # can say (Unicode that normalises to another, percent escapes...), so the schema promises this
    # plain subset; an existing file with another safe name is still imported.
    return rf"^[A-Za-z0-9_][A-Za-z0-9 ._-]{{0,240}}\{suffix}$"


class PriorityImportInput(StrictSerializer):
    openapi_properties = {"file": {"pattern": _file_name_pattern(".md")}}
    # No trimming: the name is checked exactly as sent, so " x.md" is refused rather than guessed at.
    file = serializers.CharField(
        max_length=255, trim_whitespace=False, help_text="A .md file directly in REPORTS_DIR, e.g. q3-priorities.md."
    )
    dry_run = serializers.BooleanField(required=False, default=False, help_text="Preview only; nothing is written.")


class CampaignImportInput(StrictSerializer):
    openapi_properties = {"file": {"pattern": _file_name_pattern(".json")}}

    file = serializers.CharField(
        max_length=255, trim_whitespace=False, help_text="A .json file directly in TASK_DEFS_DIR, e.g. launch.json."
    )


class PriorityItemOutput(serializers.Serializer):
    title = serializers.CharField()
    description = serializers.CharField()
    priority = serializers.CharField()
    done = serializers.BooleanField(help_text="Ticked in the file ([x]): imported as done.")
    labels = serializers.ListField(child=serializers.CharField())
    suggested_agent = serializers.CharField()
    line = serializers.IntegerField(help_text="Line of the item in the file.")
    repository = serializers.CharField(
        allow_null=True, help_text="The name its repo:<name> label gives (null: none; see warnings if unknown)."
    )


class FieldChangeOutput(serializers.Serializer):
    before = serializers.JSONField()
    after = serializers.JSONField()


class PriorityChangeOutput(serializers.Serializer):
    task_id = serializers.IntegerField()
    title = serializers.CharField()
    status = serializers.CharField()
    changes = serializers.DictField(child=FieldChangeOutput(), help_text="Field name -> its value now and after.")


class PriorityGoneOutput(serializers.Serializer):
    task_id = serializers.IntegerField()
    title = serializers.CharField()
    status = serializers.CharField()
    priority = serializers.CharField()
    action = serializers.ChoiceField(
        choices=["block", "keep"], help_text="block: not started, moves to blocked; keep: started, left alone."
    )


class PriorityPreviewCounts(serializers.Serializer):
    new = serializers.IntegerField()
    changed = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    gone = serializers.IntegerField()


class PriorityPreviewOutput(serializers.Serializer):
    file = serializers.CharField()
    dry_run = serializers.BooleanField()
    counts = PriorityPreviewCounts()
    new = PriorityItemOutput(many=True)
    changed = PriorityChangeOutput(many=True)
    gone = PriorityGoneOutput(many=True)
    warnings = serializers.ListField(
        child=serializers.CharField(), help_text="Imported anyway, but worth a look: an unknown repo:<name> label."
    )


class PriorityApplyCounts(serializers.Serializer):
    created = serializers.IntegerField()
    updated = serializers.IntegerField()
    blocked = serializers.IntegerField()
    kept = serializers.IntegerField(help_text="Gone from the file but started: left alone.")
    unchanged = serializers.IntegerField()


class PriorityApplyOutput(serializers.Serializer):
    file = serializers.CharField()
    dry_run = serializers.BooleanField()
    counts = PriorityApplyCounts()
    created = serializers.ListField(child=serializers.IntegerField(), help_text="Ids of the tasks created.")
    updated = serializers.ListField(child=serializers.IntegerField())
    blocked = serializers.ListField(child=serializers.IntegerField())
    kept = serializers.ListField(child=serializers.IntegerField())
    warnings = serializers.ListField(
        child=serializers.CharField(), help_text="Imported anyway, but worth a look: an unknown repo:<name> label."
    )


class CampaignImportOutput(serializers.Serializer):
    created = serializers.BooleanField(help_text="True when this import made the campaign (201), False when updated.")
    campaign = CampaignOutput()
    campaign_fields = serializers.ListField(child=serializers.CharField(), help_text="Fields the import changed.")
    tasks_created = serializers.ListField(child=serializers.IntegerField())
    tasks_updated = serializers.ListField(child=serializers.IntegerField())
    leads_created = serializers.IntegerField()


def preview_data(preview) -> dict:
    """A PriorityPreview as the JSON the API answers (and the dry run of the command prints)."""
    return {
        "file": preview.file_name,
        "dry_run": True,
        "counts": {
            "new": len(preview.new),
            "changed": len(preview.changed),
            "unchanged": len(preview.unchanged),
            "gone": len(preview.gone),
        },
        "new": [
            {
                "title": i.title,
                "description": i.description,
                "priority": i.priority,
                "done": i.done,
                "labels": list(i.labels),
                "suggested_agent": i.suggested_agent,
                "line": i.line,
                "repository": i.repository or None,
            }
            for i in preview.new
        ],
        "changed": [
            {
                "task_id": c.task_id,
                "title": c.title,
                "status": c.status,
                "changes": {name: {"before": b, "after": a} for name, (b, a) in c.changes.items()},
            }
            for c in preview.changed
        ],
        "gone": [
            {"task_id": g.task_id, "title": g.title, "status": g.status, "priority": g.priority, "action": g.action}
            for g in preview.gone
        ],
        "warnings": preview.warnings,
    }


def apply_data(result) -> dict:
    return {
        "file": result.file_name,
        "dry_run": False,
        "counts": {
            "created": len(result.created),
            "updated": len(result.updated),
            "blocked": len(result.blocked),
            "kept": len(result.kept),
            "unchanged": result.unchanged,
        },
        "created": result.created,
        "updated": result.updated,
        "blocked": result.blocked,
        "kept": result.kept,
        "warnings": result.warnings,
    }
