"""Lines of code and the longest functions, for a tree or a commit (issue 14's before/after figures).

    python bench/code_size.py                 # the working tree
    python bench/code_size.py --commit 62eb11e

Code lines are non-blank, non-comment lines of the product's Python (the apps, config, the client
package), without tests, migrations and bench/; bench/ is counted on its own.
"""

import argparse
import ast
import io
import subprocess
import tarfile
import tempfile
import tokenize
from pathlib import Path

PRODUCT = ("config", "sessions_app", "ledger", "workspaces", "board", "runners", "usage", "client/src")


def code_lines(source: str) -> int:
    """Lines holding a token other than a comment, a newline or indentation (docstrings count)."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    lines = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skip:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines)


def functions(path: Path, source: str):
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.end_lineno - node.lineno + 1, f"{path}:{node.lineno} {node.name}"


def product_files(root: Path):
    for top in PRODUCT:
        for path in sorted((root / top).rglob("*.py")):
            if "migrations" not in path.parts and "tests" not in path.parts:
                yield path


def measure(root: Path) -> dict:
    product = [(p, p.read_text()) for p in product_files(root)]
    bench = [(p, p.read_text()) for p in sorted((root / "bench").rglob("*.py"))]
    longest = sorted((f for p, s in product for f in functions(p.relative_to(root), s)), reverse=True)[:10]
    return {
        "product": sum(code_lines(s) for _, s in product),
        "bench": sum(code_lines(s) for _, s in bench),
        "longest": longest,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", help="measure this commit (git archive) instead of the working tree")
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        if args.commit:
            archive = subprocess.run(["git", "archive", args.commit], cwd=root, capture_output=True, check=True)
            with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
                tar.extractall(tmp, filter="data")
            root = Path(tmp)
        figures = measure(root)
    print(f"code lines (product, no tests/migrations): {figures['product']:,}")
    print(f"code lines (bench/): {figures['bench']:,}")
    print("longest functions:")
    for length, where in figures["longest"]:
        print(f"  {length:4d}  {where}")


if __name__ == "__main__":
    main()
