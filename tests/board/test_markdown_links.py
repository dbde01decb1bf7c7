"""Task descriptions are agent- and person-written markdown: links into Switchyard stay, links
that would run script (javascript:, data:, vbscript:) are stripped, however they are spelled.
The board panel's own test (test_board_page.py) checks the same through the page."""

import pytest

from board.templatetags.board_tags import markdown_safe


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
