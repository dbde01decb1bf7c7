"""What the "Review the change" page shows (SPEC §10, issue 25 §3): the task's change as
runners.task_diff reads it (no second diff parser), each file's rows from runners.diff_render, the
comments beside their lines, the newest decision and what the review form offers.

A page is bounded whatever the change: at most ``PAGE_MAX_LINES`` diff lines are laid out and
``PAGE_MAX_FILES`` files listed; past that a file is a summary ("too large to show on this page")
and the whole unified diff is one link away (GET /api/v1/tasks/{id}/diff/).
"""

from collections import defaultdict
from dataclasses import dataclass, field

from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from board.models import Task
from config.api.errors import DomainError
from runners.diff_render import UNIFIED, RowWriter, comment_line, highlight_files
from runners.models import ReviewComment, Run, TaskReview
from runners.page_selectors import ProviderChoices, provider_choices
from runners.review import comment_list, review_latest
from runners.task_diff import DiffFile, TaskChange, task_change

PAGE_MAX_LINES = 20_000
PAGE_MAX_FILES = 500


@dataclass
class FileView:
    item: DiffFile
    anchor: str
    rows: SafeString | str = ""
    note: str = ""  # why it is a summary ("" when its diff is shown)
    # Comments on the whole file, or on a line the diff no longer shows: above its diff.
    loose_comments: list[ReviewComment] = field(default_factory=list)


@dataclass
class ChangePage:
    task: Task
    view: str
    change: TaskChange | None = None
    error: str = ""  # why there is no change to show
    files: list[FileView] = field(default_factory=list)
    unlisted: int = 0  # files past PAGE_MAX_FILES: counted, not listed
    additions: int = 0
    deletions: int = 0
    comments: list[ReviewComment] = field(default_factory=list)
    latest: TaskReview | None = None
    active_run: Run | None = None
    has_run: bool = False
    choices: ProviderChoices | None = None

    @property
    def pending(self) -> list[ReviewComment]:
        """Comments no request for changes has carried yet: the review form's choices."""
        return [c for c in self.comments if c.review_id is None]

    @property
    def columns(self) -> int:
        return 3 if self.view == UNIFIED else 4

    @property
    def latest_is_current(self) -> bool:
        return bool(self.latest and self.change and self.latest.head_commit == self.change.head_commit)


def change_page_read(*, task: Task, view: str = UNIFIED, context_url: str) -> ChangePage:
    """The page of ``task``'s change laid out ``view`` (unified or split); a change the server cannot
    read (no branch, a runner's clone) is the page's ``error``, not an exception."""
    page = ChangePage(task=task, view=view)
    runs = Run.objects.filter(task=task).select_related("runner")
    page.active_run = runs.filter(status__in=Run.ACTIVE).first()
    page.has_run = page.active_run is not None or runs.exists()
    page.latest = review_latest(task=task)
    page.comments = list(comment_list(task=task).select_related("agent", "run"))
    page.choices = provider_choices(task=task)
    try:
        page.change = task_change(task=task)
    except DomainError as error:
        page.error = error.message
        return page
    page.additions = sum(f.additions for f in page.change.files)
    page.deletions = sum(f.deletions for f in page.change.files)
    page.unlisted = max(0, len(page.change.files) - PAGE_MAX_FILES)
    writer = RowWriter(view=view, context_url=context_url, comments={})
    page.files = _file_views(page, writer)
    return page


def _file_views(page: ChangePage, writer: RowWriter) -> list[FileView]:
    by_line: dict[tuple[str, int | None], list[ReviewComment]] = defaultdict(list)
    for comment in page.comments:
        by_line[(comment.path, comment.line)].append(comment)
    budget = PAGE_MAX_LINES
    views = []
    listed = page.change.files[:PAGE_MAX_FILES]
    code = iter(_highlighted(listed))
    for index, item in enumerate(listed):
        view = FileView(item=item, anchor=f"file-{index + 1}", note=item.too_large)
        lines = sum(len(h["lines"]) for h in item.hunks)
        shown_lines: set[int] = set()
        if not view.note and lines > budget:
            view.note = f"too large to show on this page: the change has more than {PAGE_MAX_LINES:,} lines"
        elif not view.note:
            budget -= lines
            shown_lines = {n for h in item.hunks for line in h["lines"] if (n := comment_line(line)) is not None}
            writer.comments = {
                (item.path, line): _comments_html(found)
                for (path, line), found in by_line.items()
                if path == item.path and line in shown_lines
            }
            # An added file has no lines past its one hunk; a deleted one none on the branch to load.
            trailing = item.status not in ("added", "deleted")
            rows = writer.file_rows(item.path, item.hunks, next(code), trailing=trailing)
            view.rows = mark_safe(rows)  # each piece escaped in diff_render
        names = {item.path, item.old_path}
        view.loose_comments = [
            c for (path, line), found in by_line.items() if path in names and line not in shown_lines for c in found
        ]
        views.append(view)
    return views


def _highlighted(files: list[DiffFile]) -> list[list[str]]:
    """Each shown file's lines as HTML, in the order _file_views lays them out (within the page's
    line budget, as there)."""
    budget = PAGE_MAX_LINES
    wanted = []
    for item in files:
        texts = [line["text"] for hunk in item.hunks for line in hunk["lines"]]
        if item.too_large or len(texts) > budget:
            continue
        budget -= len(texts)
        wanted.append((item.path, texts))
    return highlight_files(wanted)


def _comments_html(comments: list[ReviewComment]) -> str:
    return render_to_string("runners/_change_comments.html", {"comments": comments})
