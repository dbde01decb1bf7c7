"""Globs against text with unknown parts (sessions_app/tool_policy_glob.py): "matches" when some
value of the holes would match (ask, deny), "covers" when every value would (allow)."""

from fnmatch import fnmatchcase

import pytest

from sessions_app.tool_policy_glob import glob_covers, glob_matches
from sessions_app.tool_policy_shell import HOLE


@pytest.mark.parametrize(
    ("segments", "glob", "matches", "covers"),
    [
        (("rm -rf /",), "rm *", True, True),
        (("ls",), "rm *", False, False),
        ((HOLE,), "rm *", True, False),
        ((HOLE, " -rf /"), "rm *", True, False),
        (("r", HOLE, " x"), "rm *", True, False),
        (("x", HOLE), "rm *", False, False),
        (("git push ", HOLE), "git push *--force*", True, False),
        (("git push ", HOLE), "git push *", True, True),
        (("git push", HOLE), "git push *", True, False),  # the hole may hold no space
        (("pytest -q ", HOLE, " x"), "pytest*", True, True),
        (("pytest -q ", HOLE), "pytest -[qv] *", True, True),
        (("pytest -x ", HOLE), "pytest -[qv] *", False, False),
        (("a", HOLE, "c"), "a?c", True, False),
        (("a", HOLE, "c"), "[!a]*", False, False),
        (("/etc/", HOLE), "/etc/passwd", True, False),
        ((HOLE, "/etc/passwd"), "/etc/*", True, False),
        (("cd ", HOLE), "rm *", False, False),
    ],
)
def test_a_glob_against_text_with_holes(segments, glob, matches, covers):
    assert glob_matches(segments, glob) is matches
    assert glob_covers(segments, glob) is covers


@pytest.mark.parametrize("glob", ["rm *", "*--force*", "[a-c]?x*", "a[", "[!x]", "*", "", "a*b*c"])
@pytest.mark.parametrize("text", ["rm -rf /", "--force", "bqxz", "a[", "y", "", "aXbYc", "x"])
def test_without_holes_both_are_fnmatch(text, glob):
    assert glob_matches((text,), glob) is fnmatchcase(text, glob)
    assert glob_covers((text,), glob) is fnmatchcase(text, glob)
