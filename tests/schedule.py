"""The order test files are handed to pytest-xdist's workers: the longest first.

`make test` spreads whole files over workers (``--dist loadfile``). Handed out in collection order
(or, by pytest-xdist's default, the files with the most tests first), the few files that each take a
minute of real processes (killed Celery workers, ``manage.py serve``, the Claude Code CLI) were
started last and one worker ran them alone at the end while the others idled. Started first, they
overlap with everything else (longest-processing-time-first scheduling). The list comes from
``--durations=0`` on both databases (tests/README.md); a file that is missing from it keeps its
place after them. ``tests/config/test_schedule.py`` checks every entry still names a file.
"""

# Slowest first: each file's summed setup, call and teardown time on the PostgreSQL + Redis suite.
LONGEST_FILES = (
    "tests/integration/test_fleet_scenario.py",
    "tests/integration/test_archive_worker.py",
    "tests/config/test_api_conformance.py",
    "tests/sessions_app/test_serve_command.py",
    "tests/browser/test_run_flow_browser.py",
    "tests/runners/test_claude_code_scenario.py",
    "tests/runners/test_claude_code_cli.py",
    "tests/runners/test_runner_claude_e2e.py",
    "tests/runners/test_runner_gemini_e2e.py",
    "tests/runners/test_runner_codex_e2e.py",
    "tests/runners/test_claude_code_elicitation.py",
    "tests/usage/test_claude_code_telemetry.py",
    "tests/client/test_hook_claude_code.py",
    "tests/integration/test_sync_worker.py",
    "tests/integration/test_webhook_worker.py",
    "tests/config/test_chunked_upload_server.py",
    "tests/config/test_demo_passwords.py",
    "tests/runners/test_local_runner.py",
    "tests/runners/test_two_runners_race.py",
    "tests/integration/test_worker_process.py",
    "tests/client/test_crash_resume.py",
    "tests/config/test_request_cycles.py",
    "tests/workspaces/test_observer.py",
    "tests/config/test_env.py",
)


def longest_first(items: list) -> None:
    """Reorder ``items`` in place: the files of LONGEST_FILES first, in its order, then the rest
    as collected. Stable, and the same in every worker (pytest-xdist checks they agree)."""
    rank = {path: index for index, path in enumerate(LONGEST_FILES)}
    unlisted = len(LONGEST_FILES)
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], unlisted))
