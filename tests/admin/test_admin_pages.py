"""Every model has an admin whose list, search and change pages render."""

import pytest
from django.apps import apps
from django.contrib import admin

from sessions_app.models import StreamEvent
from tests.admin.factories import ROW_BUILDERS, MilestoneFactory, admin_url
from tests.factories import SessionFactory, StreamEventFactory
from workspaces.models import ArtifactVersion

OUR_APPS = ("sessions_app", "ledger", "board", "workspaces", "runners", "usage")
SHOWN_INLINE_ONLY = {ArtifactVersion}


def test_every_model_of_our_apps_is_registered_and_covered_here():
    models = {model for label in OUR_APPS for model in apps.get_app_config(label).get_models()}

    assert {m for m in models if admin.site.is_registered(m)} == models - SHOWN_INLINE_ONLY
    assert set(ROW_BUILDERS) == models - SHOWN_INLINE_ONLY


@pytest.mark.django_db
@pytest.mark.parametrize("model", ROW_BUILDERS, ids=lambda m: m._meta.label)
def test_changelist_search_and_change_pages_render(admin_client, model):
    # given one row, with the related rows its pages show
    obj = ROW_BUILDERS[model]()

    # when / then
    changelist = admin_client.get(admin_url(model, "changelist"))
    assert changelist.status_code == 200
    assert changelist.context["cl"].result_count == model.objects.count()
    assert obj in changelist.context["cl"].result_list
    assert admin_client.get(admin_url(model, "changelist"), {"q": "anything"}).status_code == 200
    change = admin_client.get(admin_url(model, "change", obj.pk))
    assert change.status_code == 200


@pytest.mark.django_db
def test_session_page_links_to_its_records_and_shows_recent_milestones(admin_client):
    session = SessionFactory(id="sess-links")
    MilestoneFactory(session=session, text="Parser rewritten")

    page = admin_client.get(admin_url(type(session), "change", session.pk)).content.decode()

    assert "Parser rewritten" in page
    assert "/admin/sessions_app/streamevent/?session__id__exact=sess-links" in page
    assert "/admin/ledger/toolinvocation/?session__id__exact=sess-links" in page
    assert "/admin/ledger/event/?subject_type=session&amp;subject_id=sess-links" in page


@pytest.mark.django_db
def test_a_session_records_link_filters_the_list_to_that_session(admin_client):
    mine, other = SessionFactory(id="sess-mine"), SessionFactory(id="sess-other")
    StreamEventFactory.create_batch(2, session=mine)
    StreamEventFactory(session=other)

    response = admin_client.get(admin_url(StreamEvent, "changelist"), {"session__id__exact": "sess-mine"})

    assert response.status_code == 200
    assert {e.session_id for e in response.context["cl"].result_list} == {"sess-mine"}
    assert len(response.context["cl"].result_list) == 2
