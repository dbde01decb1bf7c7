"""People for the page tests: a user in the given page groups (config/pages.py)."""

from django.contrib.auth.models import Group

from tests.factories import UserFactory


def user_in(*groups: str, username: str | None = None):
    kwargs = {"is_staff": False}
    if username:
        kwargs["username"] = username
    user = UserFactory(**kwargs)
    user.groups.set(Group.objects.filter(name__in=groups))
    return user
