"""The embedded Postgres' log (``$NYLON_HOME/pg/log``) is kept under NYLON_PG_LOG_MAX_BYTES by copy
and truncate, and the running server goes on writing at the start of the truncated file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from nylon_project import embedded

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_small_or_missing_log_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("NYLON_HOME", str(tmp_path))
    assert embedded.rotate_pg_log(100) is False  # no pg/log yet
    (tmp_path / "pg").mkdir()
    (tmp_path / "pg" / "log").write_text("x" * 100)
    assert embedded.rotate_pg_log(100) is False
    assert embedded.rotate_pg_log(0) is False  # 0: never rotate
    assert (tmp_path / "pg" / "log").read_text() == "x" * 100
    assert not (tmp_path / "pg" / "log.1").exists()


def test_big_log_is_copied_to_log1_and_truncated(tmp_path, monkeypatch):
    monkeypatch.setenv("NYLON_HOME", str(tmp_path))
    (tmp_path / "pg").mkdir()
    (tmp_path / "pg" / "log.1").write_text("older rotation")
    (tmp_path / "pg" / "log").write_text("line\n" * 1000)
    assert embedded.rotate_pg_log(1000) is True
    assert (tmp_path / "pg" / "log.1").read_text() == "line\n" * 1000
    assert (tmp_path / "pg" / "log").stat().st_size == 0


def test_bad_setting_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("NYLON_HOME", str(tmp_path))
    monkeypatch.setenv("NYLON_PG_LOG_MAX_BYTES", "10MB")
    with pytest.raises(Exception, match="NYLON_PG_LOG_MAX_BYTES"):
        embedded.rotate_pg_log()


def test_a_running_embedded_server_writes_at_the_start_of_the_truncated_log(tmp_path):
    # A real embedded server in a data dir of its own, in a child process (this one is attached to
    # the test database's server).
    script = textwrap.dedent("""
        import psycopg
        from nylon_project import embedded
        url = embedded.database_url()
        log = embedded.nylon_home() / "pg" / "log"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DO $$ BEGIN RAISE LOG 'nylon-before-rotation'; END $$")
            with log.open("ab") as fh:  # what weeks of server messages would leave
                fh.write(b"old message\\n" * 200_000)
            big = log.stat().st_size
            assert embedded.rotate_pg_log(1_000_000) is True
            conn.execute("DO $$ BEGIN RAISE LOG 'nylon-after-rotation'; END $$")
        import time
        for _ in range(50):
            if b"nylon-after-rotation" in log.read_bytes():
                break
            time.sleep(0.1)
        print(big, log.stat().st_size, (log.parent / "log.1").stat().st_size)
        print("after" if b"nylon-after-rotation" in log.read_bytes() else "missing")
        print("before-kept" if b"nylon-before-rotation" in (log.parent / "log.1").read_bytes() else "before-lost")
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "NYLON_EMBEDDED_PG")}
    env["NYLON_HOME"] = str(tmp_path)
    env["PYTHONPATH"] = ROOT
    out = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    sizes, after, before = out.stdout.split("\n")[:3]
    big, small, rotated = map(int, sizes.split())
    assert big > 2_000_000 and rotated >= big
    # O_APPEND: the server's next line lands at the new end, not at its old offset (a sparse file
    # the old size again)
    assert small < 10_000, small
    assert after == "after" and before == "before-kept"
