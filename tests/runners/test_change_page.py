"""The "Review the change" page (issue 25 §3): the task's change in the browser, line comments,
Request changes / Try with another agent / Approve. Against a real git clone; the page reads the
change through runners.task_diff and decides through runners.review, as the API does."""

import datetime as dt

import pytest
from django.utils import timezone

from board.models import Task
from config.pages import ENGINEERS, PRODUCT_OWNERS
from ledger.models import Event
from runners import change_page
from runners.models import ReviewComment, Run, TaskReview
from tests.factories import AgentFactory, SessionFactory, TaskFactory, UserFactory
from tests.page_users import user_in
from tests.runners.test_task_review_api import APP, commit, git
from workspaces.worktrees.services import repository_register

pytestmark = pytest.mark.django_db
S = Run.Status
HOSTILE = "<img src=x onerror=alert(1)>"
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def clone(tmp_path):
    folder = tmp_path / "code" / "app"
    folder.mkdir(parents=True)
    git(folder, "init", "-q", "-b", "main")
    commit(folder, {"README.md": "# app\n", "src/app.py": APP, "old.txt": "old\n"}, "Initial commit")
    return folder


@pytest.fixture
def task(clone):
    repository, _ = repository_register(path=str(clone))
    return TaskFactory(title="Fix the app", repository=repository, status=Task.Status.REVIEW)


@pytest.fixture
def branch(clone, task):
    """task-<id>: line 5 and line 15 of src/app.py changed (two hunks with lines between), a file
    added, a binary one; then main moves on."""
    name = f"task-{task.pk}"
    git(clone, "checkout", "-q", "-b", name)
    changed = APP.replace("line 5\n", "line five\n").replace("line 15\n", "line fifteen\n")
    commit(clone, {"src/app.py": changed, "docs/new.md": "# new\n", "logo.png": b"\x89PNG\x00\x01" * 40}, "Run 1")
    git(clone, "checkout", "-q", "main")
    commit(clone, {"later.txt": "not the task's\n"}, "Main moves on")
    return name


@pytest.fixture
def run(task):
    return Run.objects.create(
        task=task,
        provider="claude",
        status=S.SUCCEEDED,
        session=SessionFactory(task=task),
        started_at=timezone.now() - dt.timedelta(seconds=60),
        ended_at=timezone.now(),
    )


@pytest.fixture
def owner(client):
    client.force_login(user_in(PRODUCT_OWNERS, username="olivia"))
    return client


def url(task, tail=""):
    return f"/tasks/{task.pk}/change/{tail}"


def _state():
    return (
        list(Run.objects.order_by("pk").values()),
        list(ReviewComment.objects.order_by("pk").values()),
        list(TaskReview.objects.values()),
        Event.objects.count(),
    )


# --- the change ------------------------------------------------------------------------------------


def test_the_page_lists_the_files_and_shows_each_diff_highlighted(owner, task, branch, run):
    response = owner.get(url(task))

    assert response.status_code == 200
    html = response.content.decode()
    # The file list jumps to each file; totals and per-file counts.
    assert '<a href="#file-1">' in html and '<a href="#file-3">' in html
    assert "3 files changed" in html
    assert 'id="file-3" data-path="src/app.py"' in html
    # Each line of src/app.py with its numbers; Pygments' token classes on the code (a Python name).
    assert '<button class="ln">5</button>' in html
    assert '<span class="n">line</span>' in html
    assert '<span class="mark">+</span><span class="n">line</span> <span class="n">five</span>' in html
    # The binary file is a summary; main's later commit is not the task's.
    assert "Binary file, not shown" in html
    assert "later.txt" not in html
    # "Show more" between the two hunks loads lines 9-11 from the branch.
    assert "/change/lines/?path=src%2Fapp.py&amp;old=9&amp;new=9&amp;end=11&amp;view=unified" in html


def test_side_by_side_is_chosen_by_a_link_and_remembered(owner, task, branch, run):
    first = owner.get(url(task) + "?view=split")
    later = owner.get(url(task))

    assert first.cookies["change_view"].value == "split"
    assert '<table class="diff split">' in later.content.decode()
    # Side by side: the removed line beside the added one, in one row.
    assert (
        '<td class="code del"><span class="n">line</span> <span class="mi">5</span></td>'
        '<td class="num"><button class="ln">5</button></td>'
        '<td class="code add">'
    ) in later.content.decode()
    assert '<table class="diff unified">' in owner.get(url(task) + "?view=unified").content.decode()


def test_show_more_loads_the_unchanged_lines_from_the_branch(owner, task, branch, run):
    response = owner.get(url(task, "lines/"), {"path": "src/app.py", "old": 9, "new": 9, "end": 11}, **HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('<tr class="ctx">') == 3
    assert '<td class="num">9</td><td class="num"><button class="ln">9</button></td>' in html
    assert '<span class="mi">11</span>' in html and ">12<" not in html


def test_show_more_after_the_last_hunk_loads_to_the_end_of_the_file(owner, task, branch, run):
    response = owner.get(url(task, "lines/"), {"path": "src/app.py", "old": 19, "new": 19, "end": 0})

    assert response.content.decode().count('<tr class="ctx">') == 2  # lines 19 and 20


@pytest.mark.parametrize(
    ("query", "status", "says"),
    [
        ({"path": "nope.py", "old": 1, "new": 1, "end": 2}, 404, "'nope.py' is not a file on the task's branch."),
        ({"path": "../etc/passwd", "old": 1, "new": 1, "end": 2}, 400, "is not a path of a file"),
        ({"path": "src/app.py", "old": 1, "new": 5, "end": 2}, 400, "are not a range of lines"),
        ({"path": "src/app.py", "old": "x", "new": 1}, 400, "numbers"),
    ],
)
def test_show_more_refuses_what_is_not_lines_of_a_file(owner, task, branch, run, query, status, says):
    response = owner.get(url(task, "lines/"), query)

    assert response.status_code == status
    assert says in response.content.decode()


def test_a_task_without_a_branch_says_why(owner, task):
    response = owner.get(url(task))

    assert response.status_code == 200
    assert f"Task {task.pk} has no branch yet" in response.content.decode()
    assert "No run has worked on this task yet" in response.content.decode()


# --- the first screen first ---------------------------------------------------------------------------


def _rows_url(html: str) -> str:
    start = html.index('hx-get="/tasks/') + len('hx-get="')
    return html[start : html.index('"', start)].replace("&amp;", "&")


def test_files_past_the_first_screen_load_their_rows_when_reached(owner, clone, task, branch, run, monkeypatch):
    monkeypatch.setattr(change_page, "FIRST_SCREEN_LINES", 1)  # docs/new.md's one line fills the first screen
    comment = ReviewComment.objects.create(task=task, path="src/app.py", line=5, body="Say five", author="user:olivia")
    head = git(clone, "rev-parse", branch).strip()

    html = owner.get(url(task)).content.decode()

    # docs/new.md in the page; src/app.py's section has its header and a placeholder htmx fills when
    # it scrolls into view, for the head the page shows.
    assert '<span class="mark">+</span>' in html.split('data-path="src/app.py"')[0]
    section = html.split('data-path="src/app.py"')[1]
    assert '<button class="ln">5</button>' not in section and f'id="comment-{comment.pk}"' not in section
    assert 'hx-trigger="revealed"' in section and "Loading 16 lines…" in section
    rows_url = _rows_url(section)
    # Without JavaScript the placeholder is a link to the whole page, every file's rows in it.
    assert '<a href="?view=unified&amp;all=1#file-3">' in section
    whole = owner.get(url(task) + "?all=1").content.decode()
    assert 'hx-trigger="revealed"' not in whole and '<button class="ln">5</button>' in whole
    assert rows_url == f"/tasks/{task.pk}/change/file/?path=src%2Fapp.py&head={head}&view=unified"

    rows = owner.get(rows_url, **HTMX)

    assert rows.status_code == 200
    loaded = rows.content.decode()
    assert loaded.startswith('<div class="diff-wrap"><table class="diff unified">')
    assert '<span class="mark">+</span><span class="n">line</span> <span class="n">five</span>' in loaded
    assert loaded.index(f'id="comment-{comment.pk}"') > loaded.index('<button class="ln">5</button>')
    assert "/change/lines/?path=src%2Fapp.py&amp;old=9&amp;new=9&amp;end=11&amp;view=unified" in loaded


def test_a_small_change_is_all_in_the_page(owner, task, branch, run):
    html = owner.get(url(task)).content.decode()

    assert 'hx-trigger="revealed"' not in html
    assert html.count('<table class="diff unified">') == 2  # docs/new.md and src/app.py; logo.png a summary


def test_rows_for_a_head_the_branch_has_left_say_to_reload(owner, clone, task, branch, run):
    old_head = git(clone, "rev-parse", branch).strip()
    git(clone, "checkout", "-q", branch)
    commit(clone, {"src/app.py": APP.replace("line 5\n", "line 5!\n")}, "Run 2")
    git(clone, "checkout", "-q", "main")
    query = {"path": "src/app.py", "head": old_head}

    under_htmx = owner.get(url(task, "file/"), query, **HTMX)
    plain = owner.get(url(task, "file/"), query)

    assert under_htmx.status_code == 200  # htmx swaps only 2xx: the message takes the rows' place
    assert "The branch moved on since this page was loaded" in under_htmx.content.decode()
    assert 'role="alert"' in under_htmx.content.decode() and "<table" not in under_htmx.content.decode()
    assert plain.status_code == 409 and "reload the page" in plain.content.decode()


@pytest.mark.parametrize(
    ("query", "status", "says"),
    [
        ({"path": "src/app.py", "head": "main"}, 400, "head (the branch's commit id) are needed"),
        ({"path": "", "head": "HEAD"}, 400, "path (a file of the change)"),
        ({"path": "nope.py"}, 404, "'nope.py' is not a file this change shows."),
        ({"path": "logo.png"}, 404, "'logo.png' is not a file this change shows."),  # binary: a summary
        ({"path": "later.txt"}, 404, "is not a file this change shows"),  # main's, not the task's
    ],
)
def test_rows_refuse_what_is_not_a_shown_file_of_the_change(owner, clone, task, branch, run, query, status, says):
    query = {"head": git(clone, "rev-parse", branch).strip(), **query}

    response = owner.get(url(task, "file/"), query)

    assert response.status_code == status
    assert says in response.content.decode()


# --- who may ----------------------------------------------------------------------------------------


def test_people_outside_the_board_groups_get_403_and_strangers_the_login(client, clone, task, branch, run):
    assert client.get(url(task)).status_code == 302
    client.force_login(user_in(username="nobody"))
    before = _state()

    head = git(clone, "rev-parse", branch).strip()
    pages = [
        client.get(url(task)),
        client.get(url(task, "lines/"), {"path": "src/app.py", "old": 1, "new": 1}),
        client.get(url(task, "file/"), {"path": "src/app.py", "head": head}, **HTMX),
    ]
    posts = [
        client.post(url(task, "comments/"), {"path": "src/app.py", "line": "5", "body": "x"}),
        client.post(url(task, "review/"), {"action": "approve"}),
    ]

    assert [r.status_code for r in pages + posts] == [403, 403, 403, 403, 403]
    assert _state() == before


def test_staff_and_engineers_may_use_the_page(client, task, branch, run):
    client.force_login(UserFactory(username="root", is_staff=True))
    assert client.get(url(task)).status_code == 200
    client.force_login(user_in(ENGINEERS, username="erin"))
    assert client.get(url(task)).status_code == 200


# --- what the agent wrote is escaped -----------------------------------------------------------------


def test_hostile_file_names_content_and_comments_are_escaped(owner, clone, task, run):
    git(clone, "checkout", "-q", "-b", f"task-{task.pk}")
    commit(clone, {f"{HOSTILE}.py": f"x = '{HOSTILE}'\n# </script><script>alert(2)</script>\n"}, f"{HOSTILE}")
    git(clone, "checkout", "-q", "main")
    agent = AgentFactory(slug="reviewer", display_name=HOSTILE)
    ReviewComment.objects.create(
        task=task, path=f"{HOSTILE}.py", line=1, body=HOSTILE, author="agent:reviewer", agent=agent
    )

    html = owner.get(url(task)).content.decode()

    assert "<img" not in html and "<script>alert" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;.py" in html  # the name, in the list and the file's header
    assert "&lt;/script&gt;&lt;script&gt;alert(2)&lt;/script&gt;" in html


# --- too large to show --------------------------------------------------------------------------------


def test_a_huge_file_and_ten_thousand_files_are_summaries(owner, clone, task, run):
    git(clone, "checkout", "-q", "-b", f"task-{task.pk}")
    (clone / "big.txt").write_text("".join(f"generated line {n:08d}\n" for n in range(200_000)))  # 4.8 MB
    (clone / "gen").mkdir()
    for n in range(10_000):
        (clone / "gen" / f"{n:05d}.txt").write_text(f"{n}\n")
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "Generated")
    git(clone, "checkout", "-q", "main")

    response = owner.get(url(task))

    assert response.status_code == 200
    html = response.content.decode()
    assert "Too large to show: 4800000 bytes (the limit is 1048576 per file)" in html
    assert "…and 9501 more files: too large to show" in html
    assert html.count('<section class="file card"') == change_page.PAGE_MAX_FILES
    assert len(response.content) < 600_000  # bounded, whatever the change


def test_a_page_past_its_line_budget_summarises_the_rest(owner, task, branch, run, monkeypatch):
    monkeypatch.setattr(change_page, "PAGE_MAX_LINES", 3)

    html = owner.get(url(task)).content.decode()

    assert "Too large to show on this page: the change has more than 3 lines" in html


# --- comments ------------------------------------------------------------------------------------------


def test_a_comment_on_a_line_comes_back_as_its_row(owner, task, branch, run):
    response = owner.post(url(task, "comments/"), {"path": "src/app.py", "line": "5", "body": "Say <b>5</b>"}, **HTMX)

    assert response.status_code == 200
    comment = ReviewComment.objects.get()
    assert (comment.path, comment.line, comment.body, comment.author) == (
        "src/app.py",
        5,
        "Say <b>5</b>",
        "user:olivia",
    )
    html = response.content.decode()
    assert html.startswith('<tr class="comments fresh"><td colspan="3">')
    assert "Say &lt;b&gt;5&lt;/b&gt;" in html
    assert f'name="comment" value="{comment.pk}" form="review-form" checked' in html
    # On the page it shows under its line.
    page = owner.get(url(task)).content.decode()
    assert page.index(f'id="comment-{comment.pk}"') > page.index('<button class="ln">5</button>')


@pytest.mark.parametrize(
    ("line", "body", "says"),
    [
        ("10", "x", "Comment 1: line 10 of 'src/app.py' is not in the diff; comment on a line it shows."),
        ("five", "x", "line must be a line number, not 'five'."),
        ("5", "  ", "Write the comment first."),
    ],
)
def test_a_bad_comment_comes_back_in_its_form_with_the_reason(owner, task, branch, run, line, body, says):
    before = _state()

    response = owner.post(url(task, "comments/"), {"path": "src/app.py", "line": line, "body": body}, **HTMX)

    assert response.status_code == 200
    html = response.content.decode()
    assert '<tr class="comment-form-row">' in html and says.replace("'", "&#x27;") in html
    assert _state() == before


def test_a_bad_comment_without_htmx_is_the_page_again_with_400(owner, task, branch, run):
    response = owner.post(url(task, "comments/"), {"path": "nope.py", "line": "1", "body": "x"})

    assert response.status_code == 400
    assert "Comment not added: Comment 1: &#x27;nope.py&#x27; is not a file of task" in response.content.decode()
    assert not ReviewComment.objects.exists()


# --- decisions -----------------------------------------------------------------------------------------


def test_request_changes_sends_the_message_and_the_chosen_comments_to_the_same_session(owner, task, branch, run):
    mine = ReviewComment.objects.create(task=task, path="src/app.py", line=5, body="Spell it out", author="user:olivia")
    reviewer = AgentFactory(slug="reviewer")
    theirs = ReviewComment.objects.create(
        task=task, path="src/app.py", line=15, body="Same here", author="agent:reviewer", agent=reviewer
    )
    ignored = ReviewComment.objects.create(task=task, path="docs/new.md", line=1, body="Not now", author="user:olivia")
    page = owner.get(url(task)).content.decode()
    assert f'value="{theirs.pk}" form="review-form"> Use in a request for changes' in page

    response = owner.post(
        url(task, "review/"),
        {"action": "request_changes", "message": "Numbers as words", "comment": [mine.pk, theirs.pk]},
    )

    assert response.status_code == 302
    follow_up = Run.objects.exclude(pk=run.pk).get()
    assert (follow_up.provider, follow_up.resumes_id, follow_up.status) == ("claude", run.pk, S.QUEUED)
    assert follow_up.prompt == (
        "Numbers as words\n\nReview comments:\n- src/app.py:5: Spell it out\n- src/app.py:15: Same here"
    )
    review = TaskReview.objects.get()
    assert (review.decision, review.run_id, review.reviewer) == ("request_changes", follow_up.pk, "user:olivia")
    assert set(review.comments.values_list("pk", flat=True)) == {mine.pk, theirs.pk}  # carried, not copied
    assert ReviewComment.objects.count() == 3 and ReviewComment.objects.get(pk=ignored.pk).review_id is None
    after = owner.get(url(task)).content.decode()
    assert "Changes requested" in after and f"run #{follow_up.pk}" in after


def test_try_with_another_agent_is_a_fresh_session_of_that_provider_told_the_task(owner, task, branch, run):
    response = owner.post(url(task, "review/"), {"action": "another", "provider": "demo", "message": ""})

    assert response.status_code == 302
    fresh = Run.objects.exclude(pk=run.pk).get()
    assert (fresh.provider, fresh.kind, fresh.resumes_id) == ("demo", "work", run.pk)  # a fresh session after run
    assert fresh.prompt.startswith("Fix the app")
    assert "Earlier runs worked on this task on the branch task-" in fresh.prompt
    assert fresh.prompt.endswith("Carry the work on and finish it.")


def test_approve_shows_as_the_latest_decision(owner, task, branch, run):
    response = owner.post(url(task, "review/"), {"action": "approve"}, follow=True)

    assert TaskReview.objects.get().decision == "approve"
    html = response.content.decode()
    assert '<span class="badge decision-approve">Approved</span>' in html
    assert "by user:olivia" in html


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"action": "request_changes", "message": " "}, 400, "Requesting changes needs a message or comments"),
        ({"action": "merge"}, 400, "action must be one of another, approve, request_changes, not &#x27;merge&#x27;."),
        ({"action": "another", "provider": ""}, 400, "Choose the agent (provider) to try with."),
        (
            {"action": "request_changes", "message": "x", "comment": ["999"]},
            400,
            "Comments 999 are not comments of task",
        ),
    ],
)
def test_a_refused_decision_is_the_page_again_with_the_reason_and_nothing_written(
    owner, task, branch, run, body, status, says
):
    before = _state()

    response = owner.post(url(task, "review/"), body)

    assert response.status_code == status
    assert says in response.content.decode()
    assert _state() == before


def test_a_run_still_going_is_a_409_with_the_typed_message_kept(owner, task, branch, run):
    going = Run.objects.create(task=task, provider="claude", status=S.QUEUED)
    before = _state()

    response = owner.post(url(task, "review/"), {"action": "request_changes", "message": "Keep me"})

    assert response.status_code == 409
    html = response.content.decode()
    assert f"Task {task.pk}&#x27;s run {going.pk} is still queued" in html
    assert ">Keep me</textarea>" in html
    assert _state() == before


def test_a_sent_comment_is_not_sent_twice(owner, task, branch, run):
    comment = ReviewComment.objects.create(task=task, path="src/app.py", line=5, body="Once", author="user:olivia")
    owner.post(url(task, "review/"), {"action": "request_changes", "comment": [comment.pk]})
    Run.objects.filter(status=S.QUEUED).update(status=S.SUCCEEDED)
    before = _state()

    response = owner.post(url(task, "review/"), {"action": "request_changes", "comment": [comment.pk]})

    assert response.status_code == 400
    assert _state() == before
    assert "Sent with a request for changes." in owner.get(url(task)).content.decode()


# --- the card panel ------------------------------------------------------------------------------------


def test_the_card_panel_links_to_the_change_once_the_task_has_a_run(owner, task):
    assert "Review the change" not in owner.get(f"/tasks/{task.pk}/").content.decode()
    Run.objects.create(task=task, provider="demo", status=S.SUCCEEDED)

    html = owner.get(f"/tasks/{task.pk}/").content.decode()

    assert f'<a class="button" href="/tasks/{task.pk}/change/">Review the change</a>' in html
