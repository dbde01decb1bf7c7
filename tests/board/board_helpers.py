"""Shared set-up for the board page, move and live tests."""

from config.pages import PRODUCT_OWNERS
from tests.page_users import user_in


def product_owner(username: str = "po"):
    """A person in the product-owner group."""
    return user_in(PRODUCT_OWNERS, username=username)


def column_titles(response, status: str) -> list[str]:
    """The card titles of one column, in order, as the page shows them."""
    import re

    html = response.content.decode()
    start = html.index(f'id="cards-{status}"')
    end = html.index("</ol>", start)
    return re.findall(r'class="card-title"[^>]*>([^<]*)</a>', html[start:end])
