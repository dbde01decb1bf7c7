"""The web process freezes what start-up made, so full collections skip it (config/speed/gc_freeze.py).

Measured (issue 14, bench/HISTORY.md): without the freeze a full collection in a server worker took
190-270 ms under load, with it 15-70 ms. Loading config.asgi must leave Django, the apps and the
URLconf frozen."""

import subprocess
import sys

import pytest

from tests.worker import ROOT, worker_environment

pytestmark = pytest.mark.django_db(transaction=True)

PROBE = "import gc, config.asgi; print(gc.get_freeze_count())"


def test_loading_the_asgi_app_freezes_the_start_up_objects(tmp_path):
    # when the ASGI application is loaded in a fresh process, as a server worker loads it
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=worker_environment({"SWITCHYARD_VAR_DIR": str(tmp_path)}),
        capture_output=True,
        text=True,
        timeout=120,
    )

    # then start-up's objects (every view module imported, about 140,000 objects) are frozen
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 50_000
