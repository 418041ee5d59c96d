"""Settings are read once per process: a test of a configuration imports them in a subprocess of
its own, with a clean environment (nothing of this test process's Nylon configuration leaks in)
and remote service URLs (nothing embedded is started, nothing connects on import)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_settings(home: Path, names, **env: str) -> subprocess.CompletedProcess:
    """Imports the settings with ``env`` on top of the clean base and prints ``names`` as JSON
    (the last line of stdout; values JSON cannot hold are repr'd)."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("NYLON_", "CELERY_")) and k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env = {**base, "DATABASE_URL": "postgresql://nylon:pw@db.example.invalid:5432/nylon",
           "REDIS_URL": "redis://redis.example.invalid:6379/0", "NYLON_HOME": str(home), "NYLON_DB_POOL": "0",
           "NYLON_SECRET_KEY": "k" * 50, **env}
    code = ("import json, nylon_project.settings as s; "
            f"print(json.dumps({{n: getattr(s, n, None) for n in {list(names)!r}}}, default=repr))")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def settings_values(result: subprocess.CompletedProcess) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])
