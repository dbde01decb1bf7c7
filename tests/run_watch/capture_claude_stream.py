"""Re-capture fixtures/claude_stream.jsonl: the real Claude Code CLI (tests/runners/claude_cli.py)
against the scripted Messages API, run as the runner's claude provider runs it (stream-json,
--verbose). `python -m tests.run_watch.capture_claude_stream` from the checkout; not a test."""

import subprocess
import sys
import tempfile
from pathlib import Path

from tests.runners.claude_cli import claude_env, require_claude
from tests.runners.fake_anthropic import FakeAnthropic, text, tool_use

FIXTURE = Path(__file__).parent / "fixtures" / "claude_stream.jsonl"


def main() -> int:
    binary = require_claude()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder) / "work"
        work.mkdir()
        script = [
            tool_use("Bash", {"command": "ls", "description": "look around"}, text="I'll look at the workdir first."),
            tool_use("Write", {"file_path": str(work / "notes.txt"), "content": "made by claude\n"}),
            tool_use("Bash", {"command": "cat does-not-exist.txt", "description": "read a missing file"}),
            text("Done: **notes.txt** is written.\n\n- listed the workdir\n- wrote the notes"),
        ]
        argv = [str(binary), "-p", "Write notes.txt", "--output-format", "stream-json", "--verbose"]
        argv += ["--allowedTools", "Bash,Write", "--permission-mode", "acceptEdits"]
        with FakeAnthropic(script) as fake:
            env = claude_env(home=Path(folder) / "home", api_url=fake.url)
            done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=180)
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        return 1
    FIXTURE.write_text(done.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
