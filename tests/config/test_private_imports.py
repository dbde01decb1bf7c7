"""No module imports another module's private name (issue 14): `from board.services import _x`
reaches past the module's public face, so a rename inside one file breaks another. import-linter
checks the layers and circles; this checks the names, over every first-party module outside tests."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "config",
    "sessions_app",
    "ledger",
    "workspaces",
    "board",
    "runners",
    "usage",
    "composition",
    "client/src/switchyard_client",
)
FIRST_PARTY = {package.rsplit("/", 1)[-1] for package in PACKAGES}


def _private_from_imports(source: str, name: str) -> list[str]:
    tree = ast.parse(source, filename=name)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.level:
            continue
        first = (node.module or "").split(".")[0]
        if first not in FIRST_PARTY:
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                found.append(f"{name}:{node.lineno}: from {node.module} import {alias.name}")
    return found


def test_no_module_imports_another_modules_private_name():
    files = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts]
    assert len(files) > 100  # the walk found the code

    found = [line for p in files for line in _private_from_imports(p.read_text(), str(p.relative_to(ROOT)))]

    assert found == []


def test_the_check_sees_a_private_import_and_passes_dunders_and_other_libraries():
    source = "from board.services import _hidden, public\nfrom os import _exit\nfrom ledger import __version__\n"

    assert _private_from_imports(source, "board/x.py") == ["board/x.py:1: from board.services import _hidden"]
