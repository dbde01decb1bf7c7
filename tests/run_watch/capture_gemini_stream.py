"""Re-capture fixtures/gemini_stream.jsonl: the real Gemini CLI (tests/runners/gemini_cli.py) against
the scripted Gemini API, run as the runner's gemini provider runs it (stream-json). The temporary
folder's path is written as /tmp/gemini-capture. `python -m tests.run_watch.capture_gemini_stream`
from the checkout; not a test."""

import subprocess
import sys
import tempfile
from pathlib import Path

from tests.runners.fake_gemini_api import FakeGeminiAPI, function_call, text
from tests.runners.gemini_cli import gemini_env, home_settings, require_gemini

FIXTURE = Path(__file__).parent / "fixtures" / "gemini_stream.jsonl"
SESSION = "3b2e7c4a-1d5f-4e8a-9c6b-0f1e2d3c4b5a"


def main() -> int:
    binary = require_gemini()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder) / "work"
        work.mkdir()
        subprocess.run(["git", "init", "-q", str(work)], check=True)
        home_settings(Path(folder) / "home")
        script = [
            function_call(
                "run_shell_command", {"command": "echo hello", "description": "say hello"}, text="Let me look first."
            ),
            function_call("read_file", {"file_path": str(work / "missing.txt")}),
            function_call("write_file", {"file_path": str(work / "notes.md"), "content": "# Notes\n"}),
            text("Done: the notes are written, and the file that was missing stays missing."),
        ]
        argv = [str(binary), "--session-id", SESSION, "--prompt=Write the notes", "--output-format", "stream-json"]
        argv += ["--skip-trust", "--approval-mode", "auto_edit", "--allowed-tools=run_shell_command"]
        with FakeGeminiAPI(script) as fake:
            env = gemini_env(home=Path(folder) / "home", api_url=fake.url)
            done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0:
            print(done.stdout, done.stderr, file=sys.stderr)
            return done.returncode
        lines = [line for line in done.stdout.splitlines(keepends=True) if line.startswith("{")]
        FIXTURE.write_text("".join(lines).replace(str(Path(folder).resolve()), "/tmp/gemini-capture"))
    print(f"wrote {FIXTURE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
