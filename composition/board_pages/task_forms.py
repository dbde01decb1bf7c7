"""The task form of the board's "+ New task" and of the card panel's edit part: the pages' input
serializer. It parses and checks what a person typed, field by field (each error shown by its
field); the services (board/task_edits.py, runners/services_pages.py) decide and write."""

from django import forms

from board.models import Campaign, Task
from runners.services import PROVIDER_CHARS
from workspaces.models import Repository

TITLE_MAX = 500  # Task.title's column
DESCRIPTION_MAX = 100_000  # as the API's TaskCreateInput
LABELS_MAX = 50
LABEL_MAX = 100


def labels_parse(text: str) -> list[str]:
    """``"docs, web ,docs"`` -> ``["docs", "web"]``: comma-separated, trimmed, first spelling kept."""
    labels: list[str] = []
    for part in text.split(","):
        label = " ".join(part.split())
        if label and label not in labels:
            labels.append(label)
    return labels


class TaskForm(forms.Form):
    title = forms.CharField(
        max_length=TITLE_MAX,
        error_messages={
            "required": "Give the task a title.",
            "max_length": f"Keep the title under {TITLE_MAX} characters (it has %(show_value)d).",
        },
    )
    description = forms.CharField(
        required=False,
        strip=False,
        max_length=DESCRIPTION_MAX,
        error_messages={"max_length": f"The description is too long: at most {DESCRIPTION_MAX:,} characters."},
    )
    priority = forms.ChoiceField(
        choices=Task.Priority.choices,
        error_messages={
            "required": "Choose a priority (P0 to P3).",
            "invalid_choice": "Choose a priority from the list: P0, P1, P2 or P3.",
        },
    )
    labels = forms.CharField(required=False)
    campaign = forms.ModelChoiceField(
        queryset=Campaign.objects.all(),
        required=False,
        error_messages={
            "invalid_choice": "Choose a campaign from the list (or none): that one no longer exists.",
        },
    )
    repository = forms.ModelChoiceField(
        queryset=Repository.objects.all(),
        required=False,
        error_messages={
            "invalid_choice": "Choose a repository from the list (or none): that one is no longer registered.",
        },
    )

    def clean_title(self) -> str:
        # One line on a card: newlines and runs of spaces are one space.
        title = " ".join(self.cleaned_data["title"].split())
        if not title:
            raise forms.ValidationError("Give the task a title.")
        return title

    def clean_labels(self) -> list[str]:
        labels = labels_parse(self.cleaned_data["labels"])
        if len(labels) > LABELS_MAX:
            raise forms.ValidationError(f"At most {LABELS_MAX} labels (there are {len(labels)}).")
        long = [label for label in labels if len(label) > LABEL_MAX]
        if long:
            raise forms.ValidationError(f"A label is at most {LABEL_MAX} characters: {long[0][:40]!r}… is longer.")
        return labels


class NewTaskForm(TaskForm):
    run_with = forms.CharField(required=False, max_length=64)

    def clean_run_with(self) -> str:
        provider = self.cleaned_data["run_with"].strip()
        if provider and not set(provider) <= PROVIDER_CHARS:
            raise forms.ValidationError("Choose a provider from the list, or don't start an agent.")
        return provider
