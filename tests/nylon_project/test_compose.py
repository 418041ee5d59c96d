"""docker-compose.yml cannot run here (no Docker engine); this keeps it honest."""

from __future__ import annotations

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


def test_dockerfile_installs_the_project():
    text = (ROOT / "Dockerfile").read_text()
    assert "pip install" in text and "COPY pyproject.toml" in text
    for app in ("nylon_project", "memory", "teams", "assets", "reflection", "frontend"):
        assert f"COPY {app}" in text
