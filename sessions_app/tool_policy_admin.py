"""The admin of the tool policy (sessions_app/tool_policy.py): which tool uses a person must allow."""

from django import forms
from django.contrib import admin

from config.api.errors import DomainError
from sessions_app.models import ToolPolicy
from sessions_app.tool_policy import tool_policy_pattern_parse


class ToolPolicyForm(forms.ModelForm):
    class Meta:
        model = ToolPolicy
        fields = ["agent", "pattern", "action", "position", "enabled", "note"]

    def clean_pattern(self) -> str:
        pattern = self.cleaned_data["pattern"].strip()
        try:
            tool_policy_pattern_parse(pattern)
        except DomainError as error:
            raise forms.ValidationError(error.message) from None
        return pattern


@admin.register(ToolPolicy)
class ToolPolicyAdmin(admin.ModelAdmin):
    form = ToolPolicyForm
    list_display = ["pattern", "action", "agent", "position", "enabled", "note"]
    list_editable = ["action", "position", "enabled"]
    list_filter = ["action", "enabled", ("agent", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["pattern", "note", "agent__slug"]
    list_select_related = ["agent"]
    autocomplete_fields = ["agent"]
    fieldsets = [
        (
            None,
            {
                "fields": ["agent", "pattern", "action", "position", "enabled", "note"],
                "description": "Tool or Tool(argument), shell-style globs: Bash(rm *) asks before a Bash command "
                "starting with rm, Write(*.env) before writing a .env file, mcp__* before any MCP tool. The "
                "argument is Bash's command, a file tool's file_path, WebFetch's url, else the input as JSON. "
                "An agent's own rules come first, then the global ones (no agent); the first match decides.",
            },
        )
    ]
