"""The board's "+ New task" form, its markdown preview and the card panel's edit part: each field's
bad input is a 4xx naming the field with nothing saved, people outside the board are refused with
nothing saved, and what people and agents typed is escaped (composition/board_pages/task_form_views.py)."""

from html import unescape

import pytest

from board import services as board_services
from board import task_edits
from board.models import Task
from config.api.errors import DomainError
from ledger.models import Event
from runners.models import Run
from tests.board.board_helpers import product_owner
from tests.factories import CampaignFactory, TaskFactory, UserFactory
from tests.page_users import user_in
from workspaces.models import Repository

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
HOSTILE_TITLE = '<script>alert("t")</script><img src=x onerror=alert(1)>'
HOSTILE_DESCRIPTION = (
    "[click](javascript:alert(1))\n\n<script>alert('d')</script>\n\n"
    "![pixel](https://tracker.example/p.gif) ![logo](/static/img/favicon.svg)\n\n**bold**"
)


@pytest.fixture
def po_client(client):
    client.force_login(product_owner())
    return client


@pytest.fixture
def pushed(monkeypatch):
    """The task ids whose cards were pushed (the push itself is board/live.py's, tested there)."""
    ids: list[int] = []
    for module in (board_services, task_edits):
        monkeypatch.setattr(module, "board_push_tasks", lambda *, task_ids: ids.extend(task_ids))
    return ids


def _new(client, **fields):
    data = {
        "title": "Write the release notes",
        "description": "",
        "priority": "P2",
        "labels": "",
        "campaign": "",
        "repository": "",
        "run_with": "",
    }
    return client.post("/tasks/new/", {**data, **fields}, **HTMX)


def _nothing_created():
    assert Task.objects.count() == 0
    assert Run.objects.count() == 0
    assert not Event.objects.filter(name="task.created").exists()


# --- "+ New task" ----------------------------------------------------------------------------------


def test_the_board_page_offers_new_task_with_its_shortcut_and_choices(po_client):
    CampaignFactory(name="Spring launch")
    Repository.objects.create(name="shop", path="/srv/shop")

    html = po_client.get("/").content.decode()
    form = po_client.get("/tasks/new/", **HTMX).content.decode()

    assert 'id="new-task-open"' in html and 'aria-keyshortcuts="n"' in html
    assert (
        '<dialog id="new-task" class="task-panel" aria-labelledby="new-task-title" data-form-url="/tasks/new/">' in html
    )
    assert form.startswith('<div id="new-task-body"') and 'hx-post="/tasks/new/"' in form
    for name in ("title", "description", "priority", "labels", "campaign", "repository", "run_with"):
        assert f'name="{name}"' in form, name
    assert ">Spring launch</option>" in form and ">shop</option>" in form
    assert '<option value="demo">demo</option>' in form  # no runner yet: the demo provider


def test_a_product_owner_creates_a_task_with_every_field_and_its_card_is_pushed(po_client, pushed):
    campaign = CampaignFactory(name="Spring launch")
    repo = Repository.objects.create(name="shop", path="/srv/shop")

    response = _new(
        po_client,
        title="  Landing   page copy ",
        description="Say **why**.",
        priority="P1",
        labels="web, marketing, web",
        campaign=str(campaign.pk),
        repository=str(repo.pk),
    )

    assert response.status_code == 200
    task = Task.objects.get()
    assert (task.title, task.description, task.priority, task.labels) == (
        "Landing page copy",
        "Say **why**.",
        "P1",
        ["web", "marketing"],
    )
    assert (task.campaign, task.repository, task.status) == (campaign, repo, Task.Status.READY)
    assert Run.objects.count() == 0
    assert pushed == [task.pk]
    assert Event.objects.get(name="task.created").actor == "user:po"
    assert f'"id": {task.pk}' in response["HX-Trigger"]
    assert "Created “Landing page copy”." in response.content.decode()


def test_run_now_with_a_provider_queues_the_run_with_the_task(po_client):
    response = _new(po_client, title="Fix the flaky test", run_with="demo")

    assert response.status_code == 200
    run = Run.objects.get()
    assert (run.task.title, run.provider, run.status) == ("Fix the flaky test", "demo", Run.Status.QUEUED)
    assert "queued a run with demo" in response.content.decode()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("title", "", "Give the task a title."),
        ("title", "   \n ", "Give the task a title."),
        ("title", "x" * 501, "Keep the title under 500 characters (it has 501)."),
        ("description", "d" * 100_001, "The description is too long: at most 100,000 characters."),
        ("title", "nul\x00title", "Null characters are not allowed."),
        ("description", "nul\x00", "Null characters are not allowed."),
        ("labels", "a\x00b", "Null characters are not allowed."),
        ("priority", "P9", "Choose a priority from the list: P0, P1, P2 or P3."),
        ("priority", "", "Choose a priority (P0 to P3)."),
        ("labels", ", ".join(f"l{n}" for n in range(51)), "At most 50 labels (there are 51)."),
        ("labels", "ok, " + "y" * 101, "A label is at most 100 characters"),
        ("campaign", "999999", "Choose a campaign from the list (or none): that one no longer exists."),
        ("campaign", "abc", "Choose a campaign from the list (or none): that one no longer exists."),
        ("repository", "999999", "Choose a repository from the list (or none): that one is no longer registered."),
        ("run_with", "demo; rm -rf /", "Choose a provider from the list, or don't start an agent."),
        ("run_with", "p" * 65, "Ensure this value has at most 64 characters (it has 65)."),
    ],
)
def test_each_bad_field_is_a_400_shown_by_the_field_and_nothing_is_saved(po_client, pushed, field, value, message):
    response = (
        _new(po_client, title="Kept title", **{field: value}) if field != "title" else _new(po_client, title=value)
    )

    assert response.status_code == 400
    html = response.content.decode()
    error_id = "new-run-with-error" if field == "run_with" else f"new-{field}-error"
    assert f'id="{error_id}"' in html
    error = html[html.index(f'id="{error_id}"') :]
    assert message in unescape(error[: error.index("</p>")])
    if field != "title":
        assert 'value="Kept title"' in html  # what was typed stays
    _nothing_created()
    assert pushed == []


def test_a_refused_run_leaves_no_task_behind(po_client, pushed, monkeypatch):
    """Run now is in the task's transaction: a run the service refuses undoes the task too."""

    def refuse(**kwargs):
        raise DomainError("Queueing runs is paused for maintenance.", code="conflict")

    monkeypatch.setattr("runners.services_pages.run_queue", refuse)

    response = _new(po_client, title="Never half-saved", run_with="demo")

    assert response.status_code == 409
    html = response.content.decode()
    assert 'id="new-run-with-error"' in html and "Queueing runs is paused for maintenance." in html
    assert '<option value="demo" selected>demo</option>' in html
    _nothing_created()


def test_the_form_works_without_javascript(po_client):
    page = po_client.get("/tasks/new/")
    assert page.status_code == 200 and 'action="/tasks/new/"' in page.content.decode()

    response = po_client.post("/tasks/new/", {"title": "No script", "priority": "P3"})

    task = Task.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/tasks/{task.pk}/"
    refused = po_client.post("/tasks/new/", {"title": "", "priority": "P3"})
    assert refused.status_code == 400 and "Give the task a title." in refused.content.decode()
    assert Task.objects.count() == 1


@pytest.mark.parametrize("who", ["anonymous", "no group"])
def test_people_outside_the_board_are_refused_and_nothing_is_saved(client, who):
    task = TaskFactory(title="Untouched", priority="P2")
    if who == "no group":
        client.force_login(user_in(username="nobody"))

    created = _new(client, title="Sneaky")
    edited = client.post(f"/tasks/{task.pk}/edit/", {"title": "Changed", "was-title": "Untouched"}, **HTMX)
    preview = client.post("/tasks/preview/", {"description": "x"}, **HTMX)

    for response in (created, edited, preview):
        if who == "anonymous":
            assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
        else:
            assert response.status_code == 403
    assert list(Task.objects.values_list("title", flat=True)) == ["Untouched"]
    assert not Event.objects.filter(name__in=["task.created", "task.updated"]).exists()


def test_a_staff_user_outside_the_board_groups_is_refused_too(client):
    client.force_login(UserFactory(is_staff=True, username="ops"))
    assert _new(client, title="Staff, no group").status_code == 403
    assert Task.objects.count() == 0


# --- The preview and hostile text --------------------------------------------------------------------


def test_the_preview_renders_markdown_as_the_panel_does_and_drops_what_is_unsafe(po_client):
    response = po_client.post("/tasks/preview/", {"description": HOSTILE_DESCRIPTION}, **HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert "<strong>bold</strong>" in html
    assert "<script" not in html and "javascript:" not in html
    assert "tracker.example" not in html and 'alt="pixel"' in html  # the image goes, its alt text stays
    assert 'src="/static/img/favicon.svg"' in html


def test_an_empty_or_too_long_preview(po_client):
    assert "Nothing to preview yet." in po_client.post("/tasks/preview/", {"description": ""}).content.decode()
    too_long = po_client.post("/tasks/preview/", {"description": "x" * 100_001})
    assert too_long.status_code == 400 and "Too long to preview" in too_long.content.decode()


def test_hostile_titles_and_descriptions_are_escaped_on_the_card_panel_and_form(po_client):
    assert (
        _new(po_client, title=HOSTILE_TITLE, description=HOSTILE_DESCRIPTION, labels='<b>x</b>, "q"').status_code == 200
    )
    task = Task.objects.get()
    assert task.title == HOSTILE_TITLE  # kept as typed; escaped where shown

    board = po_client.get("/").content.decode()
    panel = po_client.get(f"/tasks/{task.pk}/", **HTMX).content.decode()
    refused = _new(po_client, title=HOSTILE_TITLE, priority="P9").content.decode()

    for html in (board, panel, refused):
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(&quot;t&quot;)&lt;/script&gt;" in html
    assert "<b>x</b>" not in board and "&lt;b&gt;x&lt;/b&gt;" in board
    description = panel[panel.index('aria-labelledby="d-desc"') :]
    description = description[: description.index("</section>")]
    assert "<strong>bold</strong>" in description and "tracker.example" not in description
    for html in (panel, refused):
        assert 'href="javascript' not in html and '<a href="javascript' not in html
    assert "&lt;script&gt;alert(&#x27;d&#x27;)&lt;/script&gt;" in panel  # in the edit part's textarea, as text


# --- Edits in the card panel ---------------------------------------------------------------------------


def _edit(client, task, **fields):
    """Post the panel's form as a browser does: every field, with what it held when shown."""
    shown = {
        "title": task.title,
        "description": task.description,
        "priority": task.priority,
        "labels": ", ".join(task.labels),
        "campaign": str(task.campaign_id or ""),
    }
    data = {**shown, **{f"was-{name}": value for name, value in shown.items()}, **fields}
    return client.post(f"/tasks/{task.pk}/edit/", data, **HTMX)


def test_the_panel_has_the_edit_part_and_a_campaign_link_to_the_filtered_board(po_client):
    campaign = CampaignFactory(name="Spring launch")
    task = TaskFactory(title="Landing page", campaign=campaign, labels=["web"])

    html = po_client.get(f"/tasks/{task.pk}/", **HTMX).content.decode()

    assert f'id="task-edit-{task.pk}"' in html and f'hx-post="/tasks/{task.pk}/edit/"' in html
    assert f'id="edit-{task.pk}-title" name="title" value="Landing page"' in html
    assert f'<a href="/?campaign={campaign.pk}" title="The board filtered to this campaign">Spring launch</a>' in html
    filtered = po_client.get(f"/?campaign={campaign.pk}").content.decode()
    assert "Landing page" in filtered


def test_an_edit_saves_only_the_changed_fields_records_them_and_pushes_the_card(po_client, pushed):
    campaign = CampaignFactory(name="Spring launch")
    task = TaskFactory(title="Old title", description="Old", priority="P2", labels=["a"])
    before = task.updated_at

    response = _edit(po_client, task, title="New title", priority="P0", labels="a, b", campaign=str(campaign.pk))

    assert response.status_code == 200
    task.refresh_from_db()
    assert (task.title, task.description, task.priority, task.labels, task.campaign) == (
        "New title",
        "Old",
        "P0",
        ["a", "b"],
        campaign,
    )
    assert task.updated_at > before
    event = Event.objects.get(name="task.updated")
    assert event.payload["fields"] == ["title", "priority", "labels", "campaign"] and event.actor == "user:po"
    assert pushed == [task.pk]
    html = response.content.decode()
    assert "Saved: title, priority, labels, campaign." in html
    assert '<h2 id="task-panel-title">New title</h2>' in html


def test_an_edit_leaves_a_field_someone_else_changed_meanwhile(po_client):
    task = TaskFactory(title="Shown title", priority="P2")
    shown = Task.objects.get(pk=task.pk)
    Task.objects.filter(pk=task.pk).update(title="Their new title")

    _edit(po_client, shown, priority="P1")

    task.refresh_from_db()
    assert (task.title, task.priority) == ("Their new title", "P1")


def test_an_edit_that_changes_nothing_writes_nothing(po_client, pushed):
    task = TaskFactory(title="Same")

    response = _edit(po_client, task)

    assert response.status_code == 200 and "Nothing changed." in response.content.decode()
    assert not Event.objects.filter(name="task.updated").exists() and pushed == []


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("title", " ", "Give the task a title."),
        ("priority", "P7", "Choose a priority from the list"),
        ("labels", "z" * 101, "A label is at most 100 characters"),
        ("campaign", "424242", "Choose a campaign from the list (or none)"),
        ("description", "d" * 100_001, "The description is too long"),
    ],
)
def test_a_bad_edit_is_a_400_by_its_field_and_nothing_is_saved(po_client, pushed, field, value, message):
    task = TaskFactory(title="Keep me", priority="P2", labels=["a"])

    response = _edit(po_client, task, **{"title": "Changed too", field: value})

    assert response.status_code == 400
    html = response.content.decode()
    error = html[html.index(f'id="edit-{task.pk}-{field}-error"') :]
    assert message in unescape(error[: error.index("</p>")])
    assert f'id="task-edit-{task.pk}" open' in html
    assert 'name="was-title" value="Keep me"' in html  # a corrected save still knows what was shown
    task.refresh_from_db()
    assert (task.title, task.priority, task.labels) == ("Keep me", "P2", ["a"])
    assert not Event.objects.filter(name="task.updated").exists() and pushed == []


def test_an_edit_of_a_missing_task_is_a_404(po_client):
    assert po_client.post("/tasks/987654/edit/", {"title": "x", "was-title": "y"}, **HTMX).status_code == 404


def test_a_description_starting_with_a_newline_is_shown_whole_in_the_textarea(po_client):
    task = TaskFactory(title="Lead", description="\nstarts on its second line")

    html = po_client.get(f"/tasks/{task.pk}/", HTTP_HX_REQUEST="true").content.decode()

    assert 'hx-sync="this:replace">\n\nstarts on its second line</textarea>' in html
