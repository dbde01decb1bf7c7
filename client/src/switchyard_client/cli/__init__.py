"""The `switchyard` command. Configured by SWITCHYARD_URL and SWITCHYARD_KEY (or --url/--key);
human-readable output, or JSON with --json; a non-zero exit code for every error (see EXIT_CODES in parser.py)."""

from __future__ import annotations

import sys

# Everything else is imported inside the functions: `switchyard hook` runs this module in a process
# that must finish in tens of milliseconds, and argparse alone costs several (see hook/main.py).


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["hook"]:
        # The hook's own fast path: no argparse tree, no httpx (see hook/main.py).
        from switchyard_client.hook.main import run

        return run()
    if argv[:1] == ["mcp"] and not set(argv[1:]) & {"-h", "--help"}:
        # Serves MCP over stdin/stdout until the client hangs up (see mcp/server.py).
        try:
            from switchyard_client.mcp.server import main as serve_mcp
        except ImportError:
            print("switchyard: `switchyard mcp` needs the mcp package: pip install './client[mcp]'", file=sys.stderr)
            return 3
        serve_mcp()
        return 0
    if argv[:1] == ["runner"]:
        # A daemon with its own options and help (see runner/command.py).
        from switchyard_client.runner.command import main as runner_main

        return runner_main(argv[1:])
    import json

    from switchyard_client.cli.parser import build_parser

    args = build_parser().parse_args(argv)
    from switchyard_client.api.errors import SwitchyardError
    from switchyard_client.cli.commands import dispatch

    try:
        result = dispatch(args)
    except SwitchyardError as exc:
        if args.json:
            print(json.dumps({"error": exc.message, "status": exc.status, "details": exc.body}), file=sys.stderr)
        else:
            print(f"switchyard: {exc}", file=sys.stderr)
        return exc.exit_code
    except (ValueError, OSError) as exc:
        print(f"switchyard: {exc}", file=sys.stderr)
        return 1
    return result or 0
