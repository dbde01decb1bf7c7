"""The admin of shipping settings (SPEC §10): a repository's push remote, its GitHub owner/name and
token. The token is a write-only field: typed in, stored encrypted, never rendered back (the list says
only whether one is set); an empty field keeps the one stored."""

from django import forms
from django.contrib import admin

from runners.models import PullRequest, RepositoryShipping
from runners.ship_github import github_repo_check
from runners.ship_secrets import token_decrypt, token_encrypt
from sessions_app.admin import ReadOnlyAdmin


class RepositoryShippingForm(forms.ModelForm):
    github_token = forms.CharField(
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="A GitHub token that may push and open pull requests. Never shown again; empty keeps the one set.",
    )
    clear_token = forms.BooleanField(required=False, help_text="Forget the stored token.")

    class Meta:
        model = RepositoryShipping
        fields = ["repository", "push_remote", "github_repo"]

    def clean_github_repo(self):
        value = self.cleaned_data["github_repo"].strip()
        if value:
            try:
                github_repo_check(value)
            except Exception as error:  # DomainError: shown by the field
                raise forms.ValidationError(str(error)) from None
        return value

    def save(self, commit=True):
        row = super().save(commit=False)
        if self.cleaned_data.get("clear_token"):
            row.github_token_encrypted = ""
        elif self.cleaned_data.get("github_token"):
            row.github_token_encrypted = token_encrypt(self.cleaned_data["github_token"].strip())
        if commit:
            row.save()
        return row


@admin.register(RepositoryShipping)
class RepositoryShippingAdmin(admin.ModelAdmin):
    form = RepositoryShippingForm
    list_display = ["repository", "push_remote", "github_repo", "token_set"]

    @admin.display(boolean=True, description="GitHub token set")
    def token_set(self, obj) -> bool:
        return bool(token_decrypt(obj.github_token_encrypted))


@admin.register(PullRequest)
class PullRequestAdmin(ReadOnlyAdmin):
    list_display = ["task", "branch", "remote", "state", "number", "url", "checked_at", "error"]
    list_filter = ["state"]
