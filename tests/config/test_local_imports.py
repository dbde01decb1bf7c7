"""No import of Switchyard's own code inside a function (issue 14): an import put in a function to
dodge an import circle hides the circle from import-linter. Allowed: ``AppConfig.ready()`` (Django
asks apps to import their models' users there) and the few places named below, each for a reason
that is not a circle. Third-party imports deferred for start-up time are not this check's concern."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("config", "sessions_app", "ledger", "workspaces", "board", "runners", "usage", "composition")

# file: function -> why the import cannot be at the top of the module.
ALLOWED = {
    ("config/log_filters.py", "filter"): "LOGGING is read before the app registry is ready",
    ("config/asgi_stream.py", "_take"): "config.asgi loads this module before Django is set up",
}


def _local_first_party_imports(path: Path, root: Path = ROOT) -> list[tuple[str, str, int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) or function.name == "ready":
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.ImportFrom) and not node.level:
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                if module.split(".")[0] in PACKAGES:
                    found.append((str(path.relative_to(root)), function.name, node.lineno, module))
    return found


def test_no_first_party_import_inside_a_function():
    files = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py") if "migrations" not in p.parts]
    assert len(files) > 100  # the walk found the code
    found = [hit for path in files for hit in _local_first_party_imports(path)]
    refused = [
        f"{file}:{line} in {function}(): import {module}"
        for file, function, line, module in found
        if (file, function) not in ALLOWED
    ]
    assert refused == [], "\n".join(refused)


def test_the_allowed_places_still_import_inside_a_function():
    """An entry that no longer matches is removed, so the list only shrinks."""
    found = {
        (file, function)
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        for file, function, _, _ in _local_first_party_imports(path)
    }
    assert set(ALLOWED) <= found


def test_the_check_finds_a_local_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f():\n    from board.models import Task\n    return Task\n\n\ndef ready():\n    import board\n"
    )
    assert _local_first_party_imports(sample, tmp_path) == [("sample.py", "f", 2, "board.models")]
