"""Shared set-up for the board page, move and live tests."""

from django.contrib.auth.models import Group

from config.pages import PRODUCT_OWNERS
from tests.factories import UserFactory


def product_owner(username: str = "po"):
    """A person in the product-owner group (made here too: transactional tests flush the migration's row)."""
    user = UserFactory(username=username, is_staff=False)
    group, _ = Group.objects.get_or_create(name=PRODUCT_OWNERS)
    user.groups.add(group)
    return user


def column_titles(response, status: str) -> list[str]:
    """The card titles of one column, in order, as the page shows them."""
    import re

    html = response.content.decode()
    start = html.index(f'id="cards-{status}"')
    end = html.index("</ol>", start)
    return re.findall(r'class="card-title"[^>]*>([^<]*)</a>', html[start:end])
