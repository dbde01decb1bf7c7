"""The priorities and campaigns pages: preview, start, refusals, constant queries."""

import json

import pytest

from board.imports.campaigns import campaign_import
from board.models import Campaign, Lead, Task
from config.actors import SYSTEM
from config.pages import PRODUCT_OWNERS
from tests.board.helpers import board_state
from tests.factories import UserFactory
from tests.page_users import user_in

pytestmark = pytest.mark.django_db

FILE = "# Plan\n## P1 Backend\n- [ ] Add retries #reliability\n- [ ] Old item\n"


@pytest.fixture
def owner_client(client):
    client.force_login(user_in(PRODUCT_OWNERS))
    return client


@pytest.fixture
def nobody_client(client):
    client.force_login(UserFactory(is_staff=False))
    return client


@pytest.fixture
def reports(file_roots):
    (file_roots["REPORTS_DIR"] / "plan.md").write_text(FILE)
    return file_roots["REPORTS_DIR"]


def test_the_priorities_page_lists_files_in_a_labelled_dropdown(owner_client, reports):
    response = owner_client.get("/priorities/")

    html = response.content.decode()
    assert response.status_code == 200
    assert '<label for="priority-file">Priority file</label>' in html
    assert '<option value="plan.md">plan.md</option>' in html
    assert "css/imports.css" in html


def test_an_empty_folder_explains_where_to_put_files(owner_client, file_roots):
    html = owner_client.get("/priorities/").content.decode()

    assert "No priority files yet" in html
    assert str(file_roots["REPORTS_DIR"]) in html


def test_the_preview_partial_shows_new_changed_and_gone_and_writes_nothing(owner_client, reports):
    response = owner_client.get("/priorities/preview/", {"file": "plan.md"}, HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert "Preview of plan.md" in html
    assert "<td>Add retries</td>" in html.replace("\n", "")
    assert '<span class="badge label">reliability</span>' in html
    assert "Start job" in html
    assert Task.objects.count() == 0


def test_starting_the_job_applies_it_and_shows_the_result(owner_client, reports):
    response = owner_client.post("/priorities/apply/", {"file": "plan.md"}, HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert "Imported plan.md" in html
    assert Task.objects.count() == 2
    # and after an edit the preview lists the gone item, and applying it blocks it
    (reports / "plan.md").write_text(FILE.replace("- [ ] Old item\n", ""))
    preview = owner_client.get("/priorities/preview/", {"file": "plan.md"}, HTTP_HX_REQUEST="true").content.decode()
    assert "Gone from the file" in preview
    assert "Moves to blocked (not deleted)" in preview
    owner_client.post("/priorities/apply/", {"file": "plan.md"})
    assert Task.objects.get(title="Old item").status == "blocked"


def test_starting_without_htmx_redirects_with_a_message(owner_client, reports):
    response = owner_client.post("/priorities/apply/", {"file": "plan.md"}, follow=True)

    assert response.redirect_chain == [("/priorities/?file=plan.md", 302)]
    assert "Imported plan.md: 2 created, 0 updated, 0 blocked." in response.content.decode()


def test_a_bad_name_shows_the_reason_and_writes_nothing(owner_client, reports):
    before = board_state()

    page = owner_client.get("/priorities/", {"file": "../plan.md"})
    applied = owner_client.post("/priorities/apply/", {"file": "../plan.md"}, HTTP_HX_REQUEST="true")

    assert page.status_code == 400
    assert "Refused path: it contains a &#x27;..&#x27; component." in page.content.decode()
    assert 'role="alert"' in applied.content.decode()
    assert board_state() == before


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("get", "/priorities/"),
        ("get", "/priorities/preview/?file=plan.md"),
        ("post", "/priorities/apply/"),
        ("get", "/campaigns/"),
        ("post", "/campaigns/import/"),
    ],
)
def test_a_user_with_no_group_gets_403_and_nothing_is_written(nobody_client, reports, method, url):
    before = board_state()

    response = getattr(nobody_client, method)(url, {"file": "plan.md"} if method == "post" else None)

    assert response.status_code == 403
    assert board_state() == before


def test_the_campaigns_page_starts_a_campaign_and_shows_progress_and_leads(owner_client, file_roots):
    definition = {
        "type": "launch",
        "name": "Spring launch",
        "deliverables": ["blog-post", "email"],
        "leads": [{"name": "Ada Lovelace", "company": "Analytical", "status": "qualified", "score": 80}],
    }
    (file_roots["TASK_DEFS_DIR"] / "spring.json").write_text(json.dumps(definition))
    assert "Start campaign" in owner_client.get("/campaigns/").content.decode()

    response = owner_client.post("/campaigns/import/", {"file": "spring.json"}, follow=True)
    Task.objects.filter(title="Spring launch: email").update(status="done")
    html = owner_client.get("/campaigns/").content.decode()

    campaign = Campaign.objects.get()
    assert response.redirect_chain == [(f"/campaigns/#campaign-{campaign.pk}", 302)]
    assert "Started campaign &#x27;Spring launch&#x27; with 2 deliverable tasks." in response.content.decode()
    assert "Deliverables: 1 of 2 done" in html
    assert 'aria-valuenow="1"' in html
    assert "width: 50%" in html
    assert "<td>Ada Lovelace</td><td>Analytical</td>" in html
    assert "Import again" in html
    assert Lead.objects.count() == 1


def test_a_bad_campaign_file_shows_its_message(owner_client, file_roots):
    (file_roots["TASK_DEFS_DIR"] / "bad.json").write_text('{"type": 3}')

    response = owner_client.post("/campaigns/import/", {"file": "bad.json"}, follow=True)

    assert "&#x27;bad.json&#x27;: type must be a string, not a number." in response.content.decode()
    assert Campaign.objects.count() == 0


@pytest.mark.parametrize("count", [2, 20])
def test_the_campaigns_page_runs_a_constant_number_of_queries(
    owner_client, file_roots, count, django_assert_num_queries
):
    for n in range(count):
        body = {"type": "t", "deliverables": ["a", "b"], "leads": [{"name": f"Lead {n}"}, {"name": "Other"}]}
        (file_roots["TASK_DEFS_DIR"] / f"c{n}.json").write_text(json.dumps(body))
        campaign_import(actor=SYSTEM, file_name=f"c{n}.json")

    # session, user, groups, campaigns with progress, their leads, the providers "run with" offers,
    # what the campaigns spent (usage)
    with django_assert_num_queries(7):
        response = owner_client.get("/campaigns/")

    assert response.content.decode().count('class="card campaign"') == count
