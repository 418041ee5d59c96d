"""Calling the proxy in process (Django's AsyncClient), with the caller's upstream credential and the
world's agent key, reading a streamed answer whole."""

from __future__ import annotations

import asyncio
import json

from django.test import AsyncClient


def call(world, method: str, url: str, body: dict | None = None):
    """(response, content bytes). ``raise_request_exception=False``: an unhandled error is the HTML
    500 a caller would get, not an exception in the test."""

    async def go():
        client = AsyncClient(raise_request_exception=False)
        headers = {"X-Nylon-Key": world["a"].key, "Authorization": "Bearer sk-up"}
        if method == "GET":
            response = await client.get(url, headers=headers)
        else:
            response = await client.post(url, data=json.dumps(body), content_type="application/json",
                                         headers=headers)
        content = b""
        if response.streaming:
            async for chunk in response.streaming_content:
                content += chunk
        else:
            content = response.content
        return response, content

    return asyncio.run(go())
