"""``nylon nodes get 3 | head`` ended with ``error: [Errno 32] Broken pipe``: a reader that leaves
early is no error of the command's."""

from __future__ import annotations

import os
import subprocess

import pytest

from .test_cli import NYLON
from .test_cli_first_user import _env


@pytest.mark.django_db(transaction=True)
def test_a_reader_that_leaves_early_gets_no_error_line(nylon_server, world, tmp_path):
    env = {**os.environ, **_env(tmp_path, NYLON_URL=nylon_server.url, NYLON_API_KEY=world["a"].key)}
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the first line is written
    try:
        out = subprocess.run([NYLON, "health"], stdout=w, stderr=subprocess.PIPE, env=env, text=True, timeout=120)
    finally:
        os.close(w)
    assert out.returncode == 141, out.stderr
    assert "Broken pipe" not in out.stderr and "error" not in out.stderr, out.stderr
    # and with the reader there, the same command answers as before
    ok = subprocess.run([NYLON, "health"], capture_output=True, env=env, text=True, timeout=120)
    assert ok.returncode == 0 and ok.stdout, ok.stderr
