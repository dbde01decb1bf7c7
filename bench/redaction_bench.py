"""What redaction costs per event (config/redaction.py), over a realistic mix of event payloads.

    .venv/bin/python bench/redaction_bench.py            # a few seconds, one core

``EVENT_MIX`` is also what ``bench/run.py --batch-payload mixed`` sends, so the batch figure can be
taken with redaction doing real work. Prints microseconds per event: the clean events alone, the
events that hold a secret, and the whole mix, beside ``json.dumps`` of the same payloads (what the
batch path already spends on each one) as a yardstick from the same run.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

from harness.figures import Recorder, add_option

# One event in ten holds a secret, one in three a word that makes the pre-check look closer.
EVENT_MIX = [
    {"line": "compiling module 42 of 97, 3 warnings so far"},
    {"line": "running pytest tests/ledger -q: 42 passed in 3.21s"},
    {"tool": "Bash", "command": "git log --oneline -5", "cwd": "/home/agent/work/switchyard", "exit_code": 0},
    {"message": "Reading ledger/services.py to find where summaries are made", "level": "info"},
    {"text": "commit 3f9c2a7e8b1d4c6a9e0f2b3c4d5e6f7a8b9c0d1e pushed to origin/main", "files": ["a.py", "b.py"]},
    {"usage": {"input_tokens": 1234, "output_tokens": 456, "cache_read_input_tokens": 20}, "model": "claude"},
    {"step": "plan", "items": ["add the session key check", "write tests", "update README"]},
    {"line": "GET https://api.example.com/v1/items?page=2&sort=asc -> 200 in 84 ms"},
    {"diff": "--- a/app.py\n+++ b/app.py\n@@ -1,3 +1,4 @@\n+import os\n def main():\n     pass\n"},
    {"line": "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEK3Y && ./deploy.sh"},
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_option(parser)  # --no-record
    recorder = Recorder("redaction_bench.py", enabled=not parser.parse_args().no_record)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    from config.redaction import REDACTED, redact_json

    secret = [p for p in EVENT_MIX if REDACTED in json.dumps(redact_json(p))]
    clean = [p for p in EVENT_MIX if p not in secret]
    rounds = 20_000

    def per_event(payloads, fn) -> float:
        start = time.perf_counter()
        for _ in range(rounds):
            for payload in payloads:
                fn(payload)
        return (time.perf_counter() - start) / (rounds * len(payloads)) * 1e6

    dumps = per_event(EVENT_MIX, lambda p: json.dumps(p, ensure_ascii=False))
    print(f"events in the mix: {len(EVENT_MIX)} ({len(secret)} with a secret)")
    print(f"redact_json, clean events:   {per_event(clean, redact_json):6.2f} us/event")
    print(f"redact_json, with a secret:  {per_event(secret, redact_json):6.2f} us/event")
    mix = per_event(EVENT_MIX, redact_json)
    print(f"redact_json, the whole mix:  {mix:6.2f} us/event")
    print(f"json.dumps, the whole mix:   {dumps:6.2f} us/event (yardstick)")
    recorder.record("redaction.per_event", mix, raw=dumps)
    print(recorder.note())


if __name__ == "__main__":
    main()
