"""JSON for the hook's process, through CPython's ``_json`` accelerator without the ``json`` package.

Why: ``switchyard hook`` is a new process for every Claude Code event and has tens of milliseconds
(p95 ≤ 50 ms, bench/client_bench.py). ``import json`` pulls in ``re`` and ``enum`` to compile
patterns the C scanner and encoder never use: 12-15 ms of a 45 ms call on the benchmark machine
(bench/README "The client benchmark"). ``_json`` alone costs well under a millisecond.

What it mirrors: ``json.decoder.JSONDecoder`` (``make_scanner`` over a context with the decoder's
attributes, whitespace skipped around the value) and ``json.encoder.JSONEncoder.iterencode``'s C
path (``c_make_encoder``). Both answer exactly as ``json.loads``/``json.dumps`` do, which
tests/client/test_lean_json.py checks on the same inputs; where ``_json`` is missing (another
Python implementation) the ``json`` package is used.
"""

from __future__ import annotations

try:
    import _json
except ImportError:  # not CPython: the plain package, slower to import, same answers
    _json = None

_SPACE = " \t\n\r"


class _Context:
    # The attributes _json.make_scanner reads from a JSONDecoder.
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo: dict = {}

    @staticmethod
    def parse_constant(name: str) -> float:
        return {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}[name]


_scan = _json.make_scanner(_Context()) if _json else None


def loads(text: str | bytes) -> object:
    """``json.loads(text)``: a ``ValueError`` for anything that is not one JSON value."""
    if _scan is None:
        import json

        return json.loads(text)
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    start, end = 0, len(text)
    while start < end and text[start] in _SPACE:
        start += 1
    while end > start and text[end - 1] in _SPACE:
        end -= 1
    try:
        value, stop = _scan(text[:end], start)
    except StopIteration as exc:
        raise ValueError(f"Expecting value: char {exc.value}") from None
    if stop != end:
        raise ValueError(f"Extra data: char {stop}")
    return value


def _no_default(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def dumps(
    value: object,
    *,
    separators: tuple[str, str] = (", ", ": "),
    ensure_ascii: bool = True,
    sort_keys: bool = False,
    default=None,
) -> str:
    """``json.dumps(value, separators=..., ensure_ascii=..., sort_keys=..., default=...)``."""
    if _json is None:
        import json

        return json.dumps(value, separators=separators, ensure_ascii=ensure_ascii, sort_keys=sort_keys, default=default)
    if isinstance(value, str):  # what JSONEncoder.encode does before the C encoder
        return (_json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring)(value)
    encode = _json.make_encoder(
        {},  # markers: circular references raise ValueError, as json.dumps does
        default or _no_default,
        _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring,
        None,  # indent
        separators[1],
        separators[0],
        sort_keys,
        False,  # skipkeys
        True,  # allow_nan
    )
    return "".join(encode(value, 0))
