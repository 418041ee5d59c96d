"""docker-compose.yml cannot run here (no Docker engine); this keeps it honest."""

from __future__ import annotations

import ast
import subprocess
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_services_images_and_healthchecks():
    services = _compose()["services"]
    assert set(services) == {"db", "redis", "web", "worker", "beat"}
    assert services["db"]["image"].startswith("pgvector/pgvector:")
    assert services["redis"]["image"].startswith("redis:")
    for name in ("db", "redis", "web", "worker"):
        assert services[name]["healthcheck"]["test"], name
    for name in ("web", "worker", "beat"):
        assert services[name]["build"] == "."
        assert services[name]["depends_on"]["redis"]["condition"] == "service_healthy"
    for name in services:  # recovery without manual steps (bench/faults.py measures it)
        assert services[name]["restart"] == "unless-stopped", name


def test_env_points_apps_at_compose_services():
    services = _compose()["services"]
    for name in ("web", "worker", "beat"):
        env = services[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgresql://") and "@db:5432/" in env["DATABASE_URL"]
        assert env["REDIS_URL"] == "redis://redis:6379/0"
        assert "NYLON_SECRET_KEY" in env


def test_commands_run_real_entry_points():
    services = _compose()["services"]
    assert "nylon_project.asgi:application" in " ".join(services["web"]["command"])
    assert "migrate" in " ".join(services["web"]["command"])
    assert services["worker"]["command"][:4] == ["celery", "-A", "nylon_project", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "nylon_project", "beat"]
    # the module paths named in compose exist in the repo
    assert (ROOT / "nylon_project" / "asgi.py").exists() and (ROOT / "nylon_project" / "celery.py").exists()


def _dockerfile_copies() -> list[str]:
    """The sources of every COPY (flags such as --chown dropped, the destination left off)."""
    sources = []
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        words = line.split()
        if words and words[0].upper() == "COPY":
            sources += [w.rstrip("/") or "." for w in words[1:-1] if not w.startswith("--")]
    return sources


def _dockerignore() -> list[str]:
    path = ROOT / ".dockerignore"
    lines = path.read_text().splitlines() if path.exists() else []
    return [x.strip() for x in lines if x.strip() and not x.lstrip().startswith("#")]


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule, close enough for a check: a path is out when the last pattern matching it or
    one of its parent directories is not a ``!`` exception. (fnmatch's * also crosses /, so this
    errs towards "excluded", which can only make the test stricter.)"""
    parts = path.split("/")
    out = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern.lstrip("!").strip("/")
        bare = pat[3:] if pat.startswith("**/") else None
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            tails = ["/".join(parts[j:i]) for j in range(i)] if bare else []
            if fnmatch(prefix, pat) or any(fnmatch(t, bare) for t in tails):
                out = not negate
                break
    return out


def _in_image(path: str) -> bool:
    copied = any(src == "." or path == src or path.startswith(src + "/") for src in _dockerfile_copies())
    return copied and not _ignored(path, _dockerignore())


def _needed_packages() -> set[str]:
    """Top-level packages of this repo the running app imports: the local INSTALLED_APPS and
    whatever nylon_project/urls.py imports or include()s."""
    from django.conf import settings

    names = {app.split(".")[0] for app in settings.INSTALLED_APPS}
    tree = ast.parse((ROOT / "nylon_project" / "urls.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add("nylon_project" if node.level else (node.module or "").split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "include":
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.add(arg.value.split(".")[0])
    return {n for n in names if (ROOT / n / "__init__.py").exists()}


def test_dockerfile_installs_the_project():
    text = (ROOT / "Dockerfile").read_text()
    assert "pip install" in text
    for path in ("pyproject.toml", "manage.py"):
        assert _in_image(path), path
    if "sdk/" in text:  # the image installs the SDK: then it has to be there
        assert _in_image("sdk/python/pyproject.toml")


def test_image_has_every_app_the_project_imports():
    # proxy/ was once left out of an explicit COPY list: ModuleNotFoundError, crash-looping services.
    needed = _needed_packages()
    assert {"nylon_project", "memory", "teams", "assets", "reflection", "frontend", "proxy"} <= needed
    tracked = subprocess.run(["git", "ls-files", *sorted(needed)], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split()
    missing = [p for p in tracked if not _in_image(p)]  # templates and static files too
    assert not missing, missing
    # `pip install .` installs only the packages pyproject names
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert all(any(fnmatch(app, pat) for pat in include) for app in needed), (needed, include)


def test_dockerignore_keeps_local_state_out():
    # another machine's venv, embedded database and persisted secret key have no place in an image
    for path in (".venv/bin/python", ".nylon/secret_key", ".nylon/pg/PG_VERSION", ".git/HEAD",
                 "memory/__pycache__/models.cpython-311.pyc", "docs/screenshots/graph.png"):
        assert not _in_image(path), path


def test_ignore_matcher_follows_docker_rules():
    assert _ignored("a/b/c.py", ["a"]) and _ignored("x/__pycache__/y.pyc", ["**/__pycache__"])
    assert not _ignored("a/keep.py", ["a", "!a/keep.py"]) and not _ignored("proxy/urls.py", ["docs"])
