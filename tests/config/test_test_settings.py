"""The test settings never share a path or a queue with the dev server of the same checkout.

`make test` started while `make run` was up used the dev server's broker folder: the dev worker ran
the suite's tasks against the dev database and the suite's worker ran the dev schedules. Each
settings module is read in a fresh interpreter, as the dev server and a test run each read theirs.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.worker import FILE_ROOTS, ROOT

ROOT_NAMES = (*FILE_ROOTS, "STATIC_ROOT")
READ_PATHS = """
import importlib, json, sys
s = importlib.import_module(sys.argv[1])
db = s.DATABASES["default"]
paths = {name: str(getattr(s, name)) for name in sys.argv[2].split(",")}
paths.update({f"EXPORT_ROOTS[{i}]": str(p) for i, p in enumerate(s.EXPORT_ROOTS)})
paths["db"] = str(db["NAME"])
if db.get("TEST", {}).get("NAME"):
    paths["test db"] = str(db["TEST"]["NAME"])
for key, value in getattr(s, "CELERY_BROKER_TRANSPORT_OPTIONS", {}).items():
    if key.endswith("folder") or key.startswith("data_folder"):
        paths[f"broker {key}"] = value
if s.CELERY_RESULT_BACKEND.startswith("file://"):
    paths["results"] = s.CELERY_RESULT_BACKEND.removeprefix("file://")
print(json.dumps({"paths": paths, "queue": getattr(s, "CELERY_TASK_DEFAULT_QUEUE", "celery")}))
"""


def read_settings(module: str, var_dir: Path, **env) -> dict:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "TEST_DB_SUFFIX", *ROOT_NAMES, "EXPORT_ROOTS")
        and not k.startswith(("PYTEST", "DJANGO"))
    }
    clean.update(SWITCHYARD_VAR_DIR=str(var_dir), **env)
    result = subprocess.run(
        [sys.executable, "-c", READ_PATHS, module, ",".join(ROOT_NAMES)],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


def _inside(path: str, other: str) -> bool:
    return Path(path) == Path(other) or Path(path).is_relative_to(other)


@pytest.mark.parametrize("suffix", ["", "_ci"])
def test_no_path_of_a_test_run_is_or_is_under_a_path_of_the_dev_server(tmp_path, suffix):
    # Given the dev server's settings and the suite's, over the same var/
    dev = read_settings("config.settings.local", tmp_path / "var")["paths"]
    test = read_settings("config.settings.test", tmp_path / "var", TEST_DB_SUFFIX=suffix)["paths"]

    # Then every database, broker folder and file root of the suite is its own
    shared = {
        (name, dev_name) for name, path in test.items() for dev_name, dev_path in dev.items() if _inside(path, dev_path)
    }
    assert shared == set()
    assert {"test db", "broker data_folder_in", "broker control_folder", "results", "WORKSPACE_ROOT"} <= test.keys()
    assert all(_inside(path, str(tmp_path / "var" / f"test{suffix}")) for path in test.values())


def test_on_a_shared_redis_the_suite_queues_its_tasks_apart(tmp_path):
    redis = {"REDIS_URL": "redis://127.0.0.1:6379/0"}
    dev = read_settings("config.settings.local", tmp_path / "var", **redis)
    test = read_settings("config.settings.test", tmp_path / "var", TEST_DB_SUFFIX="", **redis)

    assert (dev["queue"], test["queue"]) == ("celery", "switchyard-test")
