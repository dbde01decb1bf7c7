"""Create agent keys for bench/run.py with the `create_agent_key` management command.

Same command and output as `manage.py create_agent_key <slug>` (the key is the last line of
its stdout), run for every agent in one Django process: 32 separate `manage.py` starts cost
about 0.7 s each on this machine.

Usage (from the project root, with DATABASE_URL and DJANGO_SETTINGS_MODULE set):
    python bench/make_keys.py PREFIX FIRST COUNT
creates agents PREFIX<FIRST> .. PREFIX<FIRST+COUNT-1> (two-digit numbers) with the 'agent' scope
and prints one line per agent: "<slug> <key>".
"""

import io
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    prefix, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    import django
    from django.core.management import call_command

    django.setup()
    for i in range(first, first + count):
        slug = f"{prefix}{i:02d}"
        out, err = io.StringIO(), io.StringIO()
        call_command("create_agent_key", slug, scope=["agent"], stdout=out, stderr=err)
        print(slug, out.getvalue().strip().splitlines()[-1].strip(), flush=True)


if __name__ == "__main__":
    main()
