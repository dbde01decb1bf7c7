"""Who may open which page: login required, groups decide, a 403 page otherwise."""

import importlib

import pytest
from django.contrib.auth.models import Group

from config.pages import ENGINEERS, PRODUCT_OWNERS
from tests.page_users import user_in as _user_in

BOARD_PAGES = ["/", "/priorities/", "/campaigns/"]
ENGINEERING_PAGES = ["/sessions/", "/agents/", "/worktrees/"]


@pytest.mark.django_db
def test_the_migration_makes_the_groups_once():
    # Its function, run on the real models: a transactional test may have flushed the rows it made.
    from django.apps import apps

    migration = importlib.import_module("sessions_app.migrations.0004_page_groups")
    Group.objects.all().delete()
    migration.create_groups(apps, None)
    migration.create_groups(apps, None)
    assert sorted(Group.objects.values_list("name", flat=True)) == sorted([PRODUCT_OWNERS, ENGINEERS])


@pytest.mark.django_db
@pytest.mark.parametrize("url", BOARD_PAGES + ENGINEERING_PAGES)
def test_anonymous_goes_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


@pytest.mark.django_db
@pytest.mark.parametrize("url", BOARD_PAGES)
def test_product_owner_sees_board_pages(client, url):
    client.force_login(_user_in(PRODUCT_OWNERS))
    assert client.get(url).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("url", ENGINEERING_PAGES)
def test_product_owner_is_refused_engineering_pages_with_a_403_page(client, url):
    client.force_login(_user_in(PRODUCT_OWNERS))
    response = client.get(url)
    assert response.status_code == 403
    assert b"You may not open this page" in response.content


@pytest.mark.django_db
def test_the_403_page_names_the_group_needed_and_the_ones_the_person_is_in(client):
    # given a product owner
    client.force_login(_user_in(PRODUCT_OWNERS))

    # when they open an engineers' page
    response = client.get("/sessions/")

    # then the page says which group it wants and which they are in, and leads back to the board
    html = response.content.decode()
    assert response.status_code == 403
    assert (
        "<p>This page is for engineers; you are in product owners. "
        "Ask an engineer to add you to the engineers group if you need it.</p>"
    ) in html
    assert "add you to the <em>product owners</em>" not in html  # the old advice: join the group they are in
    assert '<a href="/">Go to the board</a>' in html


@pytest.mark.django_db
def test_the_403_page_for_someone_in_no_group(client):
    client.force_login(_user_in())

    response = client.get("/")

    html = response.content.decode()
    assert response.status_code == 403
    assert (
        "<p>This page is for engineers and product owners; you are in no group. "
        "Ask an engineer to add you to the product owners or engineers group if you need it.</p>"
    ) in html
    assert "Go to the" not in html


@pytest.mark.django_db
@pytest.mark.parametrize("url", BOARD_PAGES + ENGINEERING_PAGES)
def test_engineer_sees_everything(client, url):
    client.force_login(_user_in(ENGINEERS))
    assert client.get(url).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("url", BOARD_PAGES)
def test_user_in_no_group_is_refused(client, url):
    client.force_login(_user_in())
    assert client.get(url).status_code == 403


@pytest.mark.django_db
def test_login_page_logs_in_and_goes_to_the_board(client):
    user = _user_in(PRODUCT_OWNERS)
    user.set_password("pw-for-tests-only")
    user.save()
    page = client.get("/accounts/login/")
    assert page.status_code == 200
    assert b'name="username"' in page.content
    response = client.post("/accounts/login/", {"username": user.username, "password": "pw-for-tests-only"})
    assert response.status_code == 302
    assert response["Location"] == "/"


@pytest.mark.django_db
def test_wrong_password_says_so(client):
    user = _user_in(PRODUCT_OWNERS)
    response = client.post("/accounts/login/", {"username": user.username, "password": "wrong"})
    assert response.status_code == 200
    assert b"didn't match" in response.content
