"""The order test files are handed to pytest-xdist's workers: the longest first.

`make test` spreads whole files over workers (``--dist loadfile``). Handed out in collection order
(or, by pytest-xdist's default, the files with the most tests first), the few files that each take a
minute of real processes (killed Celery workers, ``manage.py serve``, the Claude Code CLI) were
started last and one worker ran them alone at the end while the others idled. Started first, they
overlap with everything else (longest-processing-time-first scheduling). The list comes from
``--durations=0`` on both databases (tests/README.md); a file that is missing from it keeps its
place after them. ``tests/config/test_schedule.py`` checks every entry still names a file.
"""

# Slowest first: each file's summed setup, call and teardown time (its module's servers and browser
# included), every file over 8 s, on the SQLite suite with 3 workers on a quiet machine, 2026-11-29 (a
# plugin timing each item; tests/README.md). Under both suites' load each takes about twice as long.
LONGEST_FILES = (
    "tests/config/test_api_conformance.py",  # 203 s
    "tests/integration/test_archive_worker.py",  # 90 s
    "tests/sessions_app/test_serve_command.py",  # 76 s
    "tests/browser/test_run_flow_browser.py",  # 63 s
    "tests/integration/test_worker_process.py",  # 45 s
    "tests/integration/test_sync_worker.py",  # 42 s
    "tests/integration/test_fleet_scenario.py",  # 41 s
    "tests/browser/test_run_watch_browser.py",  # 40 s
    "tests/runners/test_runner_gemini_e2e.py",  # 39 s
    "tests/sessions_app/test_mcp_http_waits.py",  # 38 s
    "tests/config/test_celery_config.py",  # 38 s
    "tests/runners/test_runner_watchdog.py",  # 38 s
    "tests/runners/test_fleet_seams_live.py",  # 30 s
    "tests/runners/test_two_runners_race.py",  # 30 s
    "tests/client/test_mcp_server.py",  # 25 s
    "tests/integration/test_webhook_worker.py",  # 24 s
    "tests/workspaces/test_observer.py",  # 23 s
    "tests/browser/test_change_page_browser.py",  # 23 s
    "tests/runners/test_runner_codex_e2e.py",  # 23 s
    "tests/usage/test_budgets_live.py",  # 21 s
    "tests/browser/test_login.py",  # 21 s
    "tests/browser/test_board_browser.py",  # 21 s
    "tests/config/test_demo_passwords.py",  # 20 s
    "tests/client/test_mcp_inspector.py",  # 19 s
    "tests/client/test_runner_live.py",  # 19 s
    "tests/browser/test_review_loop_browser.py",  # 19 s
    "tests/ledger/test_redaction_api.py",  # 18 s
    "tests/config/test_chunked_upload_server.py",  # 18 s
    "tests/runners/test_claude_code_elicitation.py",  # 18 s
    "tests/runners/test_local_runner.py",  # 18 s
    "tests/client/test_demo_agent.py",  # 17 s
    "tests/browser/test_task_form_browser.py",  # 16 s
    "tests/runners/test_runner_claude_e2e.py",  # 15 s
    "tests/browser/test_phone_width.py",  # 15 s
    "tests/browser/test_runners_browser.py",  # 14 s
    "tests/config/test_env.py",  # 14 s
    "tests/runners/test_telemetry_relay.py",  # 13 s
    "tests/browser/test_session_event_bodies_browser.py",  # 12 s
    "tests/client/test_runner_watchdog_units.py",  # 12 s
    "tests/browser/test_runner_room_browser.py",  # 12 s
    "tests/client/test_crash_resume.py",  # 12 s
    "tests/browser/test_page_details.py",  # 11 s
    "tests/browser/test_needs_you_browser.py",  # 11 s
    "tests/browser/test_session_page.py",  # 11 s
    "tests/runners/test_change_page.py",  # 11 s
    "tests/browser/test_usage_pages_browser.py",  # 11 s
    "tests/browser/test_permission_browser.py",  # 10 s
    "tests/config/test_request_cycles.py",  # 10 s
    "tests/runners/test_claude_code_cli.py",  # 10 s
    "tests/browser/test_ship_browser.py",  # 10 s
    "tests/client/test_hook_permission_live.py",  # 9 s
    "tests/browser/test_priorities_import.py",  # 9 s
    "tests/client/test_client_api.py",  # 9 s
    "tests/usage/test_claude_code_telemetry.py",  # 8 s
    "tests/client/test_cli.py",  # 8 s
)


def longest_first(items: list) -> None:
    """Reorder ``items`` in place: the files of LONGEST_FILES first, in its order, then the rest
    as collected. Stable, and the same in every worker (pytest-xdist checks they agree)."""
    rank = {path: index for index, path in enumerate(LONGEST_FILES)}
    unlisted = len(LONGEST_FILES)
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], unlisted))
