"""Task descriptions are agent- and person-written markdown: links into Switchyard stay, links
that would run script (javascript:, data:, vbscript:) are stripped, however they are spelled.
The board panel's own test (test_board_page.py) checks the same through the page."""

import pytest

from board.templatetags.board_tags import markdown_safe
from tests.board.board_helpers import product_owner
from tests.factories import TaskFactory


@pytest.mark.parametrize(
    "link",
    [
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
        "data:image/svg+xml,<svg onload=alert(1)>",
        "vbscript:msgbox(1)",
    ],
)
def test_a_script_link_loses_its_target(link):
    html = markdown_safe(f'see [the chart]({link}) and <a href="{link}">raw</a>')

    assert "the chart" in html and "raw" in html
    assert "href" not in html
    assert "javascript" not in html.lower() and "data:" not in html and "vbscript" not in html


def test_links_into_the_api_and_pages_are_kept():
    html = markdown_safe("[chart](/api/v1/sessions/s1/files/work_products/chart.svg) [page](/sessions/s1/)")

    assert 'href="/api/v1/sessions/s1/files/work_products/chart.svg"' in html
    assert 'href="/sessions/s1/"' in html


# Images load by themselves when the card opens: one from another site is a tracking pixel.
EXTERNAL_IMAGES = [
    "https://tracker.example/p.gif?card=1",
    "HTTP://tracker.example/p.gif",
    "//tracker.example/p.gif",
    "/\\tracker.example/p.gif",  # a backslash is a slash to a browser
    " https://tracker.example/p.gif",
    "&#47;&#47;tracker.example/p.gif",  # entities are decoded before the URL is read
]


@pytest.mark.parametrize("src", EXTERNAL_IMAGES)
def test_an_image_from_another_site_is_dropped_and_its_alt_text_kept(src):
    html = markdown_safe(f'![pixel]({src}) and <img src="{src}" alt="raw">')

    assert "tracker.example" not in html
    assert "src=" not in html
    assert '<img alt="pixel">' in html and '<img alt="raw">' in html


def test_an_image_of_this_site_is_kept():
    html = markdown_safe("![chart](/api/v1/sessions/s1/files/chart.png) ![logo](logo.png)")

    assert 'src="/api/v1/sessions/s1/files/chart.png"' in html and 'src="logo.png"' in html


@pytest.mark.django_db
def test_the_card_panel_drops_the_pixel_and_its_page_refuses_images_from_elsewhere(client):
    client.force_login(product_owner())
    task = TaskFactory(title="Pixel", description="Read me ![](https://tracker.example/p.gif?who=po)")

    panel = client.get(f"/tasks/{task.pk}/", HTTP_HX_REQUEST="true")
    page = client.get(f"/tasks/{task.pk}/")

    assert panel.status_code == page.status_code == 200
    for html in (panel.content.decode(), page.content.decode()):
        # The panel's edit part holds the description's source as text; no image loads from it.
        assert 'src="https://tracker.example' not in html
        shown = html[html.index('aria-labelledby="d-desc"') :]
        assert "tracker.example" not in shown[: shown.index("</section>")]
    assert page["Content-Security-Policy"] == "img-src 'self' data:"
    assert panel["Content-Security-Policy"] == "img-src 'self' data:"
