"""config/api/renderers.py: FastJSONRenderer writes the bytes DRF's JSONRenderer writes."""

import datetime
import decimal
import uuid

from django.utils.translation import gettext_lazy
from rest_framework.renderers import JSONRenderer

from config.api.renderers import FastJSONRenderer

DATA = {
    "task": 7,
    "path": "src/Grüße/世界 🌍.py",
    "text": 'line\u2028separator\u2029paragraph "quoted" \\ back\tslash\x00nul\x1f',
    "none": None,
    "flags": [True, False],
    "big": 2**62,
    "float": 1.5,
    "utc": datetime.datetime(2026, 11, 28, 16, 0, 0, 123456, tzinfo=datetime.UTC),
    "offset": datetime.datetime(2026, 11, 28, 17, 0, tzinfo=datetime.timezone(datetime.timedelta(hours=1))),
    "naive": datetime.datetime(2026, 11, 28, 16, 0),
    "day": datetime.date(2026, 11, 28),
    "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "amount": decimal.Decimal("1.10"),
    "lazy": gettext_lazy("Board"),
    "nested": {"hunks": [{"kind": "added", "old": None, "new": 1, "text": "é"}]},
}


def test_the_same_bytes_as_drfs_json_renderer():
    assert FastJSONRenderer().render(DATA) == JSONRenderer().render(DATA)


def test_nothing_renders_as_nothing():
    assert FastJSONRenderer().render(None) == JSONRenderer().render(None) == b""


def test_an_ascii_answer_the_same_bytes_too():
    # An answer of plain ASCII skips the search for U+2028 and U+2029 (none can be in it).
    data = {key: value for key, value in DATA.items() if key not in ("path", "text", "nested")}
    assert FastJSONRenderer().render(data).isascii()
    assert FastJSONRenderer().render(data) == JSONRenderer().render(data)


def test_an_embedded_fragment_is_sent_as_it_is():
    import orjson

    files = FastJSONRenderer().render([{"text": "a\u2028b"}])
    assert FastJSONRenderer().render({"files": orjson.Fragment(files)}) == JSONRenderer().render(
        {"files": [{"text": "a\u2028b"}]}
    )
