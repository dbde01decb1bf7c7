"""The tab icon: linked from every page, and /favicon.ico (asked for by browsers regardless) leads to it."""

import pytest

from config.pages import PRODUCT_OWNERS
from tests.page_users import user_in


def test_favicon_ico_redirects_for_good_to_the_svg(client):
    response = client.get("/favicon.ico")

    assert response.status_code == 301
    assert response["Location"] == "/static/img/favicon.svg"
    icon = client.get(response["Location"])
    assert icon.status_code == 200
    assert icon["Content-Type"] == "image/svg+xml"
    assert b"<svg" in b"".join(icon.streaming_content)


@pytest.mark.django_db
def test_every_page_links_the_icon(client):
    client.force_login(user_in(PRODUCT_OWNERS))

    for url in ("/", "/accounts/login/"):
        html = client.get(url).content.decode()
        assert '<link rel="icon" href="/static/img/favicon.svg" type="image/svg+xml">' in html
