"""What the "Review the change" page shows (SPEC §10, issue 25 §3): the task's change as
runners.task_diff reads it (no second diff parser), each file's rows from runners.diff_render, the
comments beside their lines, the newest decision and what the review form offers.

A page is bounded whatever the change: at most ``PAGE_MAX_LINES`` diff lines are laid out and
``PAGE_MAX_FILES`` files listed; past that a file is a summary ("too large to show on this page")
and the whole unified diff is one link away (GET /api/v1/tasks/{id}/diff/).

The first screen comes first: the files up to ``FIRST_SCREEN_LINES`` diff lines have their rows in
the page; every later file's section holds its header and a placeholder that htmx fills
(``change_file_rows``) when it scrolls into view. A 5,000-line change is then a page of a few
hundred rows that a browser shows at once, not 10,000 rows it lays out before the first one
(bench/diff_bench.py).
"""

from collections import defaultdict
from dataclasses import dataclass, field
from urllib.parse import quote

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
# The files laid out in the page itself: a screen or two of rows; the rest load as they are reached.
FIRST_SCREEN_LINES = 200
FIRST_SCREEN_FILES = 10


@dataclass
class FileView:
    item: DiffFile
    anchor: str
    rows: SafeString | str = ""
    rows_url: str = ""  # where htmx loads the rows from, for a file past the first screen
    lines: int = 0  # diff lines (the placeholder's height)
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


def change_page_read(*, task: Task, view: str = UNIFIED, context_url: str, rows_url: str = "") -> ChangePage:
    """The page of ``task``'s change laid out ``view`` (unified or split); a change the server cannot
    read (no branch, a runner's clone) is the page's ``error``, not an exception. ``rows_url``: where
    the files past the first screen load their rows from (none: every file's rows in the page)."""
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
    page.files = _file_views(page, writer, rows_url)
    return page


def change_file_rows(*, task: Task, path: str, head: str, view: str, context_url: str) -> str:
    """The rows of one file of the change as the page lays them out (its comments under their
    lines), for a file past the first screen. 409 when the branch moved on since the page showed
    ``head`` (its files and lines may differ now); 404 for a path that is no shown file of it."""
    change = task_change(task=task)
    if change.head_commit != head:
        raise DomainError(
            f"The branch moved on since this page was loaded (it is at {change.head_commit[:12]} now): "
            "reload the page to see the change as it is.",
            code="conflict",
        )
    item = next((f for f in change.files[:PAGE_MAX_FILES] if f.path == path), None)
    if item is None or item.too_large:
        raise DomainError(f"{path[:200]!r} is not a file this change shows.", code="not_found")
    comments = comment_list(task=task).filter(path=path).select_related("agent", "run")
    writer = RowWriter(view=view, context_url=context_url, comments={})
    [code] = _highlighted([item])
    return _rows(item, writer, _by_line(comments), code)


def _by_line(comments) -> dict[tuple[str, int | None], list[ReviewComment]]:
    by_line: dict[tuple[str, int | None], list[ReviewComment]] = defaultdict(list)
    for comment in comments:
        by_line[(comment.path, comment.line)].append(comment)
    return by_line


def _shown_lines(item: DiffFile) -> set[int]:
    return {n for h in item.hunks for line in h["lines"] if (n := comment_line(line)) is not None}


def _rows(item: DiffFile, writer: RowWriter, by_line: dict, code: list[str]) -> SafeString:
    mine = {line: found for (path, line), found in by_line.items() if path == item.path}
    shown_lines = _shown_lines(item) if mine else set()
    writer.comments = {(item.path, line): _comments_html(found) for line, found in mine.items() if line in shown_lines}
    # An added file has no lines past its one hunk; a deleted one none on the branch to load.
    trailing = item.status not in ("added", "deleted")
    return mark_safe(writer.file_rows(item.path, item.hunks, code, trailing=trailing))  # each piece escaped


def _file_views(page: ChangePage, writer: RowWriter, rows_url: str) -> list[FileView]:
    by_line = _by_line(page.comments)
    commented = {path for path, _ in by_line}
    budget = PAGE_MAX_LINES
    first_screen = FIRST_SCREEN_LINES
    views = []
    inline: list[FileView] = []
    head = page.change.head_commit
    for index, item in enumerate(page.change.files[:PAGE_MAX_FILES]):
        view = FileView(item=item, anchor=f"file-{index + 1}", note=item.too_large)
        view.lines = lines = sum(len(h["lines"]) for h in item.hunks)
        shown_lines: set[int] = set()
        if not view.note and lines > budget:
            view.note = f"too large to show on this page: the change has more than {PAGE_MAX_LINES:,} lines"
        elif not view.note:
            budget -= lines
            if item.path in commented:  # only to tell its comments on lines the diff shows from the others
                shown_lines = _shown_lines(item)
            if not rows_url or (first_screen > 0 and len(inline) < FIRST_SCREEN_FILES):
                first_screen -= lines
                inline.append(view)
            else:
                view.rows_url = f"{rows_url}?path={quote(item.path, safe='')}&head={head}&view={page.view}"
        names = {item.path, item.old_path}
        if names & commented:
            view.loose_comments = [
                c for (path, line), found in by_line.items() if path in names and line not in shown_lines for c in found
            ]
        views.append(view)
    for view, code in zip(inline, _highlighted([v.item for v in inline]), strict=True):
        view.rows = _rows(view.item, writer, by_line, code)
    return views


def _highlighted(files: list[DiffFile]) -> list[list[str]]:
    """Each of ``files``' lines as HTML, in the order of their hunks."""
    return highlight_files([(item.path, [line["text"] for h in item.hunks for line in h["lines"]]) for item in files])


def _comments_html(comments: list[ReviewComment]) -> str:
    return render_to_string("runners/_change_comments.html", {"comments": comments})
