"""People for the page tests: a user in the given page groups (config/pages.py)."""

from django.contrib.auth.models import Group

from tests.factories import UserFactory


def user_in(*groups: str, username: str | None = None):
    kwargs = {"is_staff": False}
    if username:
        kwargs["username"] = username
    user = UserFactory(**kwargs)
    # get_or_create: a transactional test flushes the tables, the groups the migration made included.
    user.groups.set([Group.objects.get_or_create(name=name)[0] for name in groups])
    return user
