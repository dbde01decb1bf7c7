"""Login lockout (django-axes): wrong passwords lock a username at an address, on both login pages.

Before the lockout, 60 wrong passwords and then the right one simply logged in.
"""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth import SESSION_KEY
from django.test import Client
from django.utils import timezone

from tests.factories import UserFactory

PASSWORD = "right-pw-for-tests"
LIMIT = 5
COOLOFF_MINUTES = 15
LOCKED_TEXT = f"Too many failed attempts — try again in {COOLOFF_MINUTES} minutes."

# Our login page and the admin's: the admin's wants a staff user.
LOGIN_PAGES = ["/accounts/login/", "/admin/login/"]


@pytest.fixture(autouse=True)
def lockout_settings(settings):
    settings.AXES_FAILURE_LIMIT = LIMIT
    settings.AXES_COOLOFF_TIME = timedelta(minutes=COOLOFF_MINUTES)


@pytest.fixture
def person(db):
    return UserFactory(username="pat", is_staff=True, password=PASSWORD)


def _login(client, page, username, password, address="127.0.0.1"):
    return client.post(page, {"username": username, "password": password}, REMOTE_ADDR=address)


def _hammer(client, page, username, times=60, address="127.0.0.1"):
    for _ in range(times):
        _login(client, page, username, "wrong-password", address)


@pytest.mark.django_db
@pytest.mark.parametrize("page", LOGIN_PAGES)
def test_sixty_wrong_passwords_then_the_right_one_is_refused(client, person, page):
    # given 60 wrong passwords for one username from one address
    _hammer(client, page, person.username)

    # when the right one comes
    response = _login(client, page, person.username, PASSWORD)

    # then it is refused with the lockout page, and nobody is logged in
    assert response.status_code == 429
    assert LOCKED_TEXT in response.content.decode()
    assert SESSION_KEY not in client.session
    person.refresh_from_db()
    assert person.last_login is None
    assert AccessAttempt.objects.get(username=person.username).failures_since_start == 61


@pytest.mark.django_db
@pytest.mark.parametrize("page", LOGIN_PAGES)
def test_the_limit_is_the_setting(client, person, page):
    # given one wrong password fewer than the limit: the right one still logs in
    _hammer(client, page, person.username, times=LIMIT - 1)
    assert _login(client, page, person.username, PASSWORD).status_code == 302
    assert client.session[SESSION_KEY] == str(person.pk)

    # and a success forgets the failures (AXES_RESET_ON_SUCCESS)
    assert not AccessAttempt.objects.filter(username=person.username).exists()


@pytest.mark.django_db
def test_the_lockout_page_looks_like_the_site_and_says_when(client, person):
    # given a locked-out username
    _hammer(client, "/accounts/login/", person.username, times=LIMIT)

    # when another try comes (even a wrong one)
    response = _login(client, "/accounts/login/", person.username, "wrong-again")

    # then the site's page says how long to wait and where to go back
    page = response.content.decode()
    assert response.status_code == 429
    assert "registration/locked_out.html" in [template.name for template in response.templates]
    assert "<title>Too many failed attempts · Switchyard</title>" in page
    assert LOCKED_TEXT in page
    assert '<a href="/accounts/login/">Back to the login page</a>' in page


@pytest.mark.django_db
def test_the_lock_is_per_username_and_address(client, person):
    # given pat locked out at one address
    _hammer(client, "/accounts/login/", person.username, times=LIMIT)

    # when pat logs in from another address
    elsewhere = Client()
    response = _login(elsewhere, "/accounts/login/", person.username, PASSWORD, address="10.0.0.2")

    # then that works: someone hammering a name does not lock its owner out everywhere
    assert response.status_code == 302
    assert elsewhere.session[SESSION_KEY] == str(person.pk)


@pytest.mark.django_db
def test_the_lock_ends_after_the_cooloff(client, person):
    # given a lockout whose last try was longer ago than the cool-off
    _hammer(client, "/accounts/login/", person.username, times=LIMIT)
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=COOLOFF_MINUTES, seconds=1))

    # when / then the right password logs in again
    assert _login(client, "/accounts/login/", person.username, PASSWORD).status_code == 302


@pytest.mark.django_db
def test_an_engineer_unlocks_in_the_admin(client, admin_client, person):
    # given pat and sam locked out
    _hammer(client, "/accounts/login/", person.username, times=LIMIT)
    sam = UserFactory(username="sam", password=PASSWORD)
    _hammer(client, "/accounts/login/", sam.username, times=LIMIT)
    pats = AccessAttempt.objects.get(username="pat")

    # when an engineer runs "Unlock" on pat's row
    changelist = admin_client.get("/admin/axes/accessattempt/")
    assert "Unlock: forget these failed attempts" in changelist.content.decode()
    response = admin_client.post(
        "/admin/axes/accessattempt/", {"action": "unlock", "_selected_action": [pats.pk]}, follow=True
    )

    # then pat may log in at once, and sam is still locked out
    assert "1 login(s) unlocked: they may log in again now." in response.content.decode()
    assert list(AccessAttempt.objects.values_list("username", flat=True)) == ["sam"]
    assert _login(client, "/accounts/login/", "pat", PASSWORD).status_code == 302
    assert _login(Client(), "/accounts/login/", "sam", PASSWORD).status_code == 429


@pytest.mark.django_db
def test_a_person_without_delete_permission_cannot_unlock(client, person):
    # given a locked-out pat and a staff member with view permission only
    from django.contrib.auth.models import Permission

    _hammer(client, "/accounts/login/", person.username, times=LIMIT)
    viewer = UserFactory(username="viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_accessattempt"))
    viewer_client = Client()
    viewer_client.force_login(viewer)

    # when they open the list and try the action anyway
    changelist = viewer_client.get("/admin/axes/accessattempt/")
    response = viewer_client.post(
        "/admin/axes/accessattempt/",
        {"action": "unlock", "_selected_action": [AccessAttempt.objects.get().pk]},
        follow=True,
    )

    # then the action is not offered, nothing is unlocked, and pat is still refused
    assert changelist.status_code == 200
    assert "Unlock: forget these failed attempts" not in changelist.content.decode()
    assert "No action selected." in response.content.decode()
    assert AccessAttempt.objects.get().failures_since_start == LIMIT
    assert _login(client, "/accounts/login/", person.username, PASSWORD).status_code == 429
