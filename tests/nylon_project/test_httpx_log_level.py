"""httpx logs each request's full URL at INFO, credentials in it included (an LLM URL of the form
https://user:pass@host/v1): the service keeps that logger at WARNING whatever NYLON_LOG_LEVEL is."""

from __future__ import annotations

import logging

import httpx


def test_httpx_request_lines_stay_out_of_the_log(caplog):
    transport = httpx.MockTransport(lambda request: httpx.Response(200))
    with caplog.at_level(logging.INFO), httpx.Client(transport=transport) as client:
        client.get("http://llmuser:s3cr3t@127.0.0.1:9/v1/models")
    assert not [r for r in caplog.records if "s3cr3t" in r.getMessage()]
