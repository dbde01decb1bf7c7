"""A campaign definition's preview (board/imports/campaigns.campaign_preview) on the campaigns page,
as priority files have: what an import would create and change, nothing written; and a campaign's
name links to the board filtered to it."""

import json

import pytest

from board.imports.campaigns import campaign_import, campaign_preview
from board.models import Campaign, Lead, Task
from config.actors import SYSTEM
from config.pages import PRODUCT_OWNERS
from tests.board.helpers import board_state
from tests.page_users import user_in

pytestmark = pytest.mark.django_db

SPRING = {
    "type": "marketing-campaign",
    "name": "Spring launch",
    "priority": "high",
    "deliverables": ["blog-post", "email"],
    "leads": [{"name": "Ada", "email": "ada@example.com"}],
}


@pytest.fixture
def owner_client(client):
    client.force_login(user_in(PRODUCT_OWNERS))
    return client


@pytest.fixture
def defs(file_roots):
    folder = file_roots["TASK_DEFS_DIR"]
    (folder / "spring.json").write_text(json.dumps(SPRING))
    return folder


def test_the_preview_of_a_new_definition_lists_its_tasks_and_leads_and_writes_nothing(owner_client, defs):
    before = board_state()

    response = owner_client.get("/campaigns/preview/?file=spring.json", HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert "Creates campaign <strong>Spring launch</strong>" in html
    assert "<strong>2</strong> new tasks" in html and "<strong>1</strong> new lead" in html
    assert "<td>Spring launch: blog-post</td>" in html and "<td>Spring launch: email</td>" in html
    assert 'action="/campaigns/import/"' in html and ">Start campaign</button>" in html
    assert board_state() == before and Campaign.objects.count() == 0 and Lead.objects.count() == 0


def test_the_preview_of_a_changed_definition_shows_what_changes(owner_client, defs):
    campaign_import(actor=SYSTEM, file_name="spring.json")
    campaign = Campaign.objects.get()
    changed = {**SPRING, "name": "Spring relaunch", "priority": "critical", "deliverables": ["email", "video"]}
    changed["leads"] = [*SPRING["leads"], {"name": "Grace"}]
    (defs / "spring.json").write_text(json.dumps(changed))
    before = board_state()

    preview = campaign_preview(file_name="spring.json")
    html = owner_client.get("/campaigns/?file=spring.json").content.decode()

    assert preview.campaign == campaign
    assert preview.campaign_changes["name"] == ("Spring launch", "Spring relaunch")
    assert preview.campaign_changes["priority"] == ("P1", "P0")
    assert [item.title for item in preview.new] == ["Spring relaunch: video"]
    assert [(c.title, sorted(c.changes)) for c in preview.changed] == [("Spring launch: email", ["priority", "title"])]
    assert preview.leads_new == 1 and preview.unchanged == 0
    assert f'Updates campaign <a href="/?campaign={campaign.pk}"' in html
    assert "<del>Spring launch</del> → <ins>Spring relaunch</ins>" in html
    assert board_state() == before and Campaign.objects.get().name == "Spring launch"


def test_a_definition_already_imported_previews_as_nothing_to_do(owner_client, defs):
    campaign_import(actor=SYSTEM, file_name="spring.json")

    html = owner_client.get("/campaigns/preview/?file=spring.json").content.decode()

    assert "importing it again would change nothing" in html and "/campaigns/import/" not in html


@pytest.mark.parametrize(
    ("name", "body", "message"),
    [
        ("bad.json", '{"type": 3}', "&#x27;bad.json&#x27;: type must be a string, not a number."),
        ("../etc.json", None, "etc.json"),
        ("missing.json", None, "missing.json"),
    ],
)
def test_a_bad_or_missing_file_shows_its_reason_and_writes_nothing(owner_client, defs, name, body, message):
    if body is not None:
        (defs / name).write_text(body)

    partial = owner_client.get(f"/campaigns/preview/?file={name}", HTTP_HX_REQUEST="true")
    page = owner_client.get(f"/campaigns/?file={name}")

    assert partial.status_code == 200 and page.status_code == 400
    for html in (partial.content.decode(), page.content.decode()):
        assert "Cannot import" in html and message in html
    assert Campaign.objects.count() == 0 and Task.objects.count() == 0


def test_a_hostile_definition_is_escaped_in_the_preview(owner_client, defs):
    (defs / "evil.json").write_text(
        json.dumps({"type": "t", "name": "<script>x()</script>", "deliverables": ["<img src=x>"]})
    )

    html = owner_client.get("/campaigns/preview/?file=evil.json").content.decode()

    assert "<script>x()" not in html and "<img src=x>" not in html
    assert "&lt;script&gt;x()&lt;/script&gt;: &lt;img src=x&gt;" in html


def test_people_outside_the_board_may_not_preview(client, defs):
    client.force_login(user_in(username="nobody"))
    assert client.get("/campaigns/preview/?file=spring.json").status_code == 403
    client.logout()
    assert client.get("/campaigns/preview/?file=spring.json").status_code == 302


def test_each_file_has_a_preview_button_and_each_campaign_links_to_its_board(owner_client, defs):
    campaign_import(actor=SYSTEM, file_name="spring.json")
    campaign = Campaign.objects.get()

    html = owner_client.get("/campaigns/").content.decode()

    assert 'hx-get="/campaigns/preview/?file=spring.json"' in html and ">Preview</a>" in html
    assert f'<a href="/?campaign={campaign.pk}" title="The board filtered to this campaign">Spring launch</a>' in html
