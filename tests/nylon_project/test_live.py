"""``nylon_project.live``: the helpers the black-box tests and the bench scripts start real
processes with."""

from __future__ import annotations

import socket

import httpx
import pytest

from nylon_project.live import free_port, listening, live_env, start_live_server

pytestmark = pytest.mark.django_db(transaction=True)


def test_free_port_is_free_and_listening_sees_a_listener():
    port = free_port()
    assert not listening(port)
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        assert listening(port)


def test_the_live_server_serves_this_process_database(world):
    from django.db import connection

    assert live_env(X_ONE="1")["DATABASE_URL"].split("?")[0].endswith("/" + connection.settings_dict["NAME"])
    server = start_live_server()
    try:
        assert server.env["NYLON_ENQUEUE_TASKS"] == "0" and server.env["NYLON_CACHE_PREFIX"].startswith("test-live-")
        # the key was created in this test's database: the server reads the same one
        r = httpx.get(f"{server.url}/api/v1/org", headers={"Authorization": f"Bearer {world['a'].key}"}, timeout=30)
        assert r.status_code == 200 and r.json()["slug"] == "alpha"
    finally:
        server.stop()
    assert server.proc.poll() is not None
