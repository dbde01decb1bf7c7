"""lean_json answers exactly as the json package does (the hook uses it to spare json's imports)."""

import json

import pytest

from switchyard_client.hook import lean_json
from tests.client.hook_events import FIXTURES as RECORDED_EVENTS

VALUES = [
    {"a": [1, 2.5, None, True, False, 'x\u00e9\n"\\'], "b": {"c": -1e300, "d": 0.1}},
    "line\u2028separator \U0001f600 and a tab\t",
    3,
    -0.0,
    12345678901234567890,
    [],
    {},
    [float("inf"), float("-inf")],
    {"z": 1, "a": {"y": [3, {"b": 2}]}},
    {"\u00fcber": "caf\u00e9", "": ""},
    True,
    None,
]
OPTIONS = [
    {},
    {"ensure_ascii": False},
    {"separators": (",", ":")},
    {"separators": (",", ":"), "ensure_ascii": False},
    {"sort_keys": True},
]


@pytest.mark.parametrize("value", VALUES + list(RECORDED_EVENTS.values()), ids=repr)
@pytest.mark.parametrize("options", OPTIONS, ids=repr)
def test_dumps_writes_what_json_dumps_writes(value, options):
    assert lean_json.dumps(value, **options) == json.dumps(value, **options)


@pytest.mark.parametrize("value", VALUES + list(RECORDED_EVENTS.values()), ids=repr)
def test_loads_reads_back_what_json_loads_reads(value):
    text = json.dumps(value, ensure_ascii=False)
    assert repr(lean_json.loads(text)) == repr(json.loads(text))
    assert repr(lean_json.loads(text.encode())) == repr(json.loads(text.encode()))


@pytest.mark.parametrize("text", [" [1] ", '\n{"a": 1}\r\n', "NaN", "-Infinity", '"\\u00e9"', "1.5e3", " true\t"])
def test_loads_takes_whitespace_and_constants_as_json_does(text):
    assert repr(lean_json.loads(text)) == repr(json.loads(text))


@pytest.mark.parametrize("text", ["", "   ", "[1,", "{} x", '{"a"}', "nul", "[1] [2]", "{'a': 1}"])
def test_loads_refuses_what_json_refuses_with_a_value_error(text):
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        lean_json.loads(text)


def test_dumps_refuses_what_json_refuses():
    with pytest.raises(TypeError, match="not JSON serializable"):
        lean_json.dumps({"x": object()})
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        lean_json.dumps(loop)
    marker = object()
    assert lean_json.dumps({"x": marker}, default=str) == json.dumps({"x": marker}, default=str)
