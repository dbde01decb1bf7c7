"""The order test files are handed to pytest-xdist's workers (tests/schedule.py)."""

from pathlib import Path
from types import SimpleNamespace

from tests.schedule import LONGEST_FILES, longest_first

REPO = Path(__file__).resolve().parents[2]


def test_every_listed_file_exists_once():
    missing = [path for path in LONGEST_FILES if not (REPO / path).is_file()]
    assert missing == [], f"tests/schedule.py names files that are gone: {missing}"
    assert len(set(LONGEST_FILES)) == len(LONGEST_FILES)


def test_the_listed_files_go_first_in_the_lists_order_and_the_rest_keep_theirs():
    first, second = LONGEST_FILES[0], LONGEST_FILES[1]
    ids = [
        "tests/admin/test_a.py::test_one",
        f"{second}::test_x",
        "tests/board/test_b.py::test_two",
        f"{first}::test_y[1]",
        "tests/admin/test_a.py::test_three",
        f"{first}::test_y[2]",
    ]
    items = [SimpleNamespace(nodeid=nodeid) for nodeid in ids]
    longest_first(items)
    assert [item.nodeid for item in items] == [
        f"{first}::test_y[1]",
        f"{first}::test_y[2]",
        f"{second}::test_x",
        "tests/admin/test_a.py::test_one",
        "tests/board/test_b.py::test_two",
        "tests/admin/test_a.py::test_three",
    ]


def test_make_test_keeps_that_order_when_it_hands_files_out():
    # pytest-xdist's default hands out the files with the most tests first, whatever the collection order.
    makefile = (REPO / "Makefile").read_text()
    assert "--dist loadfile --no-loadscope-reorder" in makefile
