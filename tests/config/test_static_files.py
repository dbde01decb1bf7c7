"""Static files under the ASGI server: the bytes of the file, streamed with an async iterator, so
Django neither warns on the console nor reads the file whole first (config/static_files.py)."""

import httpx
import pytest
from django.contrib.staticfiles import finders

from tests.browser.server import module_server

SYNC_ITERATOR_WARNING = "StreamingHttpResponse must consume synchronous iterators"


@pytest.fixture(scope="module")
def server(django_db_setup, django_db_blocker, tmp_path_factory):
    process = module_server(django_db_blocker, tmp_path_factory, "static")
    yield process
    process.stop()


def file_bytes(name: str) -> bytes:
    with open(finders.find(name), "rb") as file:
        return file.read()


def test_static_files_stream_whole_ranged_and_cached_without_the_sync_iterator_warning(server):
    # given the files a board page loads
    names = ["js/board.js", "css/switchyard.css", "django_htmx/htmx-2.min.js", "img/favicon.svg"]

    with httpx.Client(base_url=server.url) as http:
        for name in names:
            # when each is fetched whole
            response = http.get(f"/static/{name}")

            # then the body is the file's bytes
            assert response.status_code == 200, name
            assert response.content == file_bytes(name), name

        # when a range is asked for, and a copy the browser holds is revalidated
        htmx = file_bytes("django_htmx/htmx-2.min.js")
        ranged = http.get("/static/django_htmx/htmx-2.min.js", headers={"Range": "bytes=10-109"})
        etag = http.get("/static/css/switchyard.css").headers["ETag"]
        cached = http.get("/static/css/switchyard.css", headers={"If-None-Match": etag})
        head = http.head("/static/js/board.js")

    # then the range is those bytes, the revalidation a bodiless 304, HEAD only the headers
    assert ranged.status_code == 206
    assert ranged.content == htmx[10:110]
    assert cached.status_code == 304 and cached.content == b""
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["Content-Length"]) == len(file_bytes("js/board.js"))
    # and the server said nothing about synchronous iterators
    assert SYNC_ITERATOR_WARNING not in server.output()
