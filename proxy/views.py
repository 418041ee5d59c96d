"""The memory proxy: OpenAI ``/chat/completions`` and Anthropic ``/messages``, forwarded verbatim
to the configured upstream with the agent's memory injected into the system prompt.

Per request: authenticate the agent by ``X-Nylon-Key`` (fails closed: a key that cannot be checked,
however slow or failing Nylon is, is a 503 and nothing goes upstream), then build the context
bundle inside a time budget (``NYLON_PROXY_BUDGET_MS``); on success the body is rewritten (system
prompt only, plus a memory tool when the caller offered tools) and the answer carries
``X-Nylon-Memory: injected``. If the context is slow or failing, the caller's bytes go upstream
untouched with ``X-Nylon-Memory: none`` (``none; reason=busy`` when no build slot was free).
Key checks and builds run on pools of their own, so no key check waits behind a build.
The caller's upstream credentials (``Authorization``, ``x-api-key``...) are passed through and are
neither stored nor logged; the Nylon key never leaves for the upstream. After the answer, the user
turn and the answer are written back off the request path (``writeback.enqueue``)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from urllib.parse import quote

import httpx
from django.conf import settings
from django.db import close_old_connections
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from nylon_project.errors import error_body, error_response
from nylon_project.request_context import current_request_id, reset_request_id, set_request_id

from . import stats, writeback
from .bundle import PROTOCOLS, Bundle, build_bundle, offered_tools, run_tool
from .slots import BuildSlots

log = logging.getLogger("nylon.proxy")

# Never forwarded upstream: hop-by-hop headers, what we recompute, and Nylon's own credentials.
DROP_REQUEST = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                          "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding", "cookie",
                          "x-nylon-key", "x-nylon-session", "x-request-id"})
# Never relayed to the caller: hop-by-hop headers, what Django recomputes, and state the upstream
# would set on Nylon's origin. A Set-Cookie of the provider's would be stored by the caller for
# Nylon's host (and sent back to Nylon with every later request, console included); Alt-Svc would
# point the caller's client at another service for Nylon's origin.
DROP_RESPONSE = frozenset({"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "te", "trailer",
                           "trailers", "transfer-encoding", "upgrade", "content-length", "content-encoding",
                           "x-request-id", "set-cookie", "set-cookie2", "alt-svc",
                           # our server sets its own: relayed, an answer carried two of each
                           "server", "date"})
MAX_CAPTURE = 1024 * 1024  # bytes of a streamed answer kept for the write-back
MAX_TOOL_ROUNDS = 3
WRITEBACK_HEADER = "X-Nylon-Writeback"
WRITEBACK_SKIPPED = "skipped; reason=read-only-key"

# How long the key check may take, apart from the memory budget: the budget bounds what memory may
# add to a request, the key check decides whether the request is let through at all. Past this (a
# saturated executor, a database that does not answer) the caller gets a 503 with Retry-After, never
# a forward: a key check that fails open let any caller through under load.
AUTH_TIMEOUT_SECS = 5.0
AUTH_RETRY_AFTER_SECS = 1

# Three thread pools, so that no request waits behind work of another kind. A thread cannot be
# interrupted: a call given up at its timeout (``asyncio.wait_for``) keeps its thread until it ends.
# Key checks shared one pool with the bundle builds, and one org's requests whose builds were slow
# (a long query to embed), each answered at the budget without memory, kept every thread busy: the
# next key checks, any org's, queued behind them and were refused after AUTH_TIMEOUT_SECS.
# - key checks: a pool of their own; a check is one indexed look-up and the rate limit's Redis call.
# - bundle builds: at most BUILD_THREADS at once, BUILD_SLOTS_PER_ORG of them for one org
#   (``_build_slots``); a request that finds no slot free skips its memory at once, it never
#   queues a build. Below the database pool's 10 connections per process (NYLON_DB_POOL_MAX), so
#   that running builds leave connections to the key checks.
# - the rest: memory-tool calls (a request waits for them, with no budget) and what runs after the
#   answer (stats, the write-back).
AUTH_THREADS = 8
BUILD_THREADS = 8
BUILD_SLOTS_PER_ORG = 4
_auth_executor = ThreadPoolExecutor(max_workers=AUTH_THREADS, thread_name_prefix="nylon-proxy-auth")
_build_executor = ThreadPoolExecutor(max_workers=BUILD_THREADS, thread_name_prefix="nylon-proxy-build")
_build_slots = BuildSlots(BUILD_THREADS, BUILD_SLOTS_PER_ORG)
_executor = ThreadPoolExecutor(max_workers=16, thread_name_prefix="nylon-proxy")

# Why a request went without memory, in its stats and (busy) in X-Nylon-Memory.
SKIPPED_BUSY = "busy"  # no build slot free: no build started
SKIPPED_OVER_BUDGET = "over_budget"  # the budget ran out: the build given up at it, or none started
MEMORY_BUSY = "none; reason=busy"
_clients: dict[int, httpx.AsyncClient] = {}


def _upstream_client() -> httpx.AsyncClient:
    """One pooled client per event loop (TLS handshakes to the provider are not per request)."""
    loop = asyncio.get_running_loop()
    client = _clients.get(id(loop))
    if client is None or client.is_closed:
        timeout = httpx.Timeout(settings.NYLON_PROXY_TIMEOUT_SECS, connect=10.0)
        client = _clients[id(loop)] = httpx.AsyncClient(timeout=timeout, trust_env=False)
    return client


def _db_call(fn, /, *args, request_id: str | None = None, **kwargs):
    """A database-touching call for the executor: fresh connections in, none leaked out, and the
    request's id on its log lines and on the tasks it sends (the executor's threads do not inherit
    the request's context, and a streamed answer finishes after the request's middleware is done)."""
    rid = request_id or current_request_id()

    def run():
        token = set_request_id(rid)
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        finally:
            close_old_connections()
            reset_request_id(token)

    return run


async def _in_thread(fn, /, *args, **kwargs):
    return await asyncio.get_running_loop().run_in_executor(_executor, _db_call(fn, *args, **kwargs))


async def _in_auth_thread(fn, /, *args):
    return await asyncio.get_running_loop().run_in_executor(_auth_executor, _db_call(fn, *args))


_pending: set[Future] = set()  # background steps not done yet (``wait_background``)


def _background(fn, /, *args, request_id: str | None = None) -> None:
    """Fire and forget on the executor: nothing the caller waits for (failures are logged)."""
    future = _executor.submit(_db_call(fn, *args, request_id=request_id))
    _pending.add(future)
    future.add_done_callback(_pending.discard)
    future.add_done_callback(_log_failure)


def wait_background(timeout: float = 60) -> None:
    """Waits for the background steps queued so far (a write-back, the stats): a test's teardown
    empties the tables, and a write-back still running under it deadlocked with the TRUNCATE and
    then wrote into the next test."""
    wait(list(_pending), timeout=timeout)


def _log_failure(future) -> None:
    if not future.cancelled() and future.exception() is not None:
        exc = future.exception()
        log.error("proxy background step failed: %s", exc, exc_info=(type(exc), exc, exc.__traceback__))


def _error(status: int, code: str, message: str, request) -> JsonResponse:
    return error_response(request, status, code, message)


def _throttled(request, wait: int) -> JsonResponse:
    """Same code and Retry-After as REST's 429, which the LLM SDKs wait out and retry."""
    resp = _error(429, "throttled", f"Rate limit of this Nylon key exceeded; retry in {wait} s.", request)
    resp["Retry-After"] = str(wait)
    return resp


_UPSTREAM_UNREACHABLE = "The {} upstream could not be reached."
_UPSTREAM_FAILED = "The {} upstream failed mid-answer."


def _upstream_failed(request, protocol_name: str, memory: str, exc: Exception, stage: str) -> JsonResponse:
    """The one answer for an upstream that fails before the caller got a status line: connecting,
    reading the answer, or any follow-up of a memory-tool round. A bare exception here would be
    Django's HTML 500, which no LLM SDK can parse and which says nothing about who failed."""
    log.warning("proxy: upstream %s failed while %s: %s", protocol_name, stage, type(exc).__name__)
    message = (_UPSTREAM_UNREACHABLE if stage == "connecting" else _UPSTREAM_FAILED).format(protocol_name)
    resp = _error(502, "upstream_unavailable", message, request)
    resp["X-Nylon-Memory"] = memory
    return resp


class _AuthFailed(Exception):
    pass


class _AuthUnavailable(Exception):
    """The key could not be checked (too slow, the database failing): refused, never passed."""


class _RateLimited(Exception):
    def __init__(self, wait: int):
        super().__init__(wait)
        self.wait = wait


def _authenticate(raw_key: str):
    from assets.mcp import rate_limited
    from teams.auth import authenticate_key

    actor = authenticate_key(raw_key)
    if actor is None:
        raise _AuthFailed
    # The key's one budget, shared with REST and MCP: each proxied request counts, memory or not.
    throttled = rate_limited(actor)
    if throttled is not None:
        raise _RateLimited(throttled.wait)
    return actor


async def _check_key(raw_key: str):
    """The key's actor, or _AuthFailed (bad or revoked key), _RateLimited (over its rate),
    _AuthUnavailable (the check did not finish in ``AUTH_TIMEOUT_SECS`` or failed). Every route of
    the proxy goes through here, so none forwards a request whose key was not found valid."""
    try:
        return await asyncio.wait_for(_in_auth_thread(_authenticate, raw_key), AUTH_TIMEOUT_SECS)
    except (_AuthFailed, _RateLimited):
        raise
    except Exception as exc:
        log.warning("proxy: key check failed or too slow (%s): refused", type(exc).__name__)
        raise _AuthUnavailable from exc


def _auth_unavailable(request) -> JsonResponse:
    """A 503 the LLM SDKs retry after Retry-After, in the one error shape, as REST's for a database
    that cannot answer."""
    resp = _error(503, "unavailable", "The Nylon key could not be checked; retry shortly.", request)
    resp["Retry-After"] = str(AUTH_RETRY_AFTER_SECS)
    return resp


async def _prepare(request, protocol, body: dict | None):
    """(actor, bundle or None, why there is none: ``_build``). The key check fails closed
    (``_check_key``'s exceptions); only the context bundle fails open: built within what is left of
    the time budget, else None and the request goes through without memory."""
    from teams.models import Scope

    deadline = time.monotonic() + settings.NYLON_PROXY_BUDGET_MS / 1000
    actor = await _check_key(request.headers.get("X-Nylon-Key", ""))
    if body is None or not actor.can(Scope.READ) or not isinstance(body.get("messages"), list):
        return actor, None, None
    bundle, skipped = await _build(actor, protocol.last_user_text(body), _offer_tools(body),
                                   deadline - time.monotonic())
    return actor, bundle, skipped


async def _build(actor, query: str, tools: bool, seconds: float) -> tuple[Bundle | None, str | None]:
    """(the bundle, None), or (None, why): ``SKIPPED_BUSY`` (no build slot free to the org: none
    started, nothing queued), ``SKIPPED_OVER_BUDGET`` (``seconds`` ran out: the build was given up
    at the budget, or none was started with no time left), None (the build failed).

    The slot is given back when the build ends, not when the request stops waiting for it: a build
    given up at the budget goes on in its thread, and counts among the running ones until it is done."""
    if seconds <= 0:
        log.info("proxy: the key check took the memory budget: passing through without memory")
        return None, SKIPPED_OVER_BUDGET
    org_id = actor.org.id
    if not _build_slots.try_acquire(org_id):
        log.info("proxy: no build slot free for org %s: passing through without memory", org_id)
        return None, SKIPPED_BUSY
    try:
        future = _build_executor.submit(_db_call(build_bundle, actor=actor, query=query, tools=tools))
    except BaseException:
        _build_slots.release(org_id)
        raise
    # Run when the build ends (in its thread), or when it is cancelled before it started.
    future.add_done_callback(lambda _f: _build_slots.release(org_id))
    waited = asyncio.wrap_future(future)
    try:
        done, _ = await asyncio.wait([waited], timeout=seconds)
    finally:
        if not waited.done():  # given up (or the caller left): a running build runs on, in its slot
            waited.cancel()
    if not done:
        log.warning("proxy: context not built in budget: passing through (its build runs on)")
        return None, SKIPPED_OVER_BUDGET
    try:
        return waited.result(), None
    except Exception as exc:
        log.warning("proxy: context failed (%s): passing through", type(exc).__name__)
        return None, None


def _offer_tools(body: dict) -> bool:
    """Memory tools only when the caller offers tools, and not on streams (the proxy answers its own
    tool calls, which needs the whole reply before the caller sees any of it)."""
    tools = body.get("tools")
    return isinstance(tools, list) and bool(tools) and body.get("stream") is not True


def _forward_headers(request) -> dict:
    headers = {k: v for k, v in request.headers.items() if k.lower() not in DROP_REQUEST}
    headers["Accept-Encoding"] = "identity"  # we read the answer for the write-back
    return headers


def _relay_headers(upstream: httpx.Response, response) -> None:
    """The upstream's end-to-end headers onto ``response``: not ``DROP_RESPONSE``, nor any header
    the upstream's ``Connection`` names (hop-by-hop by RFC 9110 7.6.1), nor Content-Type (set with
    the body)."""
    named = {t.strip().lower() for t in upstream.headers.get("connection", "").split(",") if t.strip()}
    for k, v in upstream.headers.items():
        name = k.lower()
        if name not in DROP_RESPONSE and name not in named and name != "content-type":
            response[k] = v


def _copy_headers(upstream: httpx.Response, response, memory: str, bundle: Bundle | None,
                  writes_back: bool = True) -> None:
    _relay_headers(upstream, response)
    response["X-Nylon-Memory"] = memory
    if bundle is not None:
        response["X-Nylon-Prefix-Hash"] = bundle.stable_hash
    if not writes_back:
        response[WRITEBACK_HEADER] = WRITEBACK_SKIPPED


def _parse_sse(data: bytes, protocol) -> str:
    text = []
    for line in data.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if not payload or payload == "[DONE]":
            continue
        try:
            event = json.loads(payload)
        except ValueError:
            continue
        if isinstance(event, dict):
            text.append(protocol.stream_text(event))
    return "".join(text)


async def _proxy(request, protocol_name: str):
    from teams.models import Scope

    if request.method != "POST":
        return _error(405, "method_not_allowed", "POST only.", request)
    t0 = time.perf_counter()
    protocol = PROTOCOLS[protocol_name]
    if not request.headers.get("X-Nylon-Key"):
        return _error(401, "not_authenticated", "Send your Nylon agent key in X-Nylon-Key.", request)
    raw = request.body
    try:
        body = json.loads(raw)
        body = body if isinstance(body, dict) else None
    except ValueError:
        body = None
    try:
        actor, bundle, skipped = await _prepare(request, protocol, body)
    except _AuthFailed:
        return _error(401, "authentication_failed", "Invalid or revoked Nylon key.", request)
    except _RateLimited as exc:
        # Refused, not passed through without memory: the limit caps what one key sends through
        # Nylon.
        return _throttled(request, exc.wait)
    except _AuthUnavailable:
        return _auth_unavailable(request)

    tools = offered_tools(actor) if bundle is not None and _offer_tools(body) else {}
    if bundle is not None:
        sent_body = protocol.inject(body, bundle.text, tools=tools)
        payload, memory = json.dumps(sent_body).encode(), "injected"
    else:
        sent_body, payload = body, raw
        memory = MEMORY_BUSY if skipped == SKIPPED_BUSY else "none"
    # A read-only key's exchanges are not written back (writeback.write_back needs the write
    # scope). Said on the answer, as X-Nylon-Memory says what was injected: a 200 alone let the
    # caller believe its conversation was being remembered.
    writes_back = actor.can(Scope.WRITE)
    upstream_url = getattr(settings, f"NYLON_PROXY_{protocol_name.upper()}_UPSTREAM").rstrip("/") + protocol.path
    if request.META.get("QUERY_STRING"):
        upstream_url += "?" + request.META["QUERY_STRING"]
    headers = _forward_headers(request)
    explicit_session = request.headers.get("X-Nylon-Session", "")
    overhead_ms = (time.perf_counter() - t0) * 1000

    def after(answer: str, ok: bool, upstream_failed: bool = False) -> None:
        """Off the request path: stats, then the write-back (of answered exchanges only)."""
        stats.record(org_id=actor.org.id, agent_id=actor.id, injected=bundle is not None,
                     tokens=bundle.approx_tokens if bundle else 0,
                     stable_hash=bundle.stable_hash if bundle else None, overhead_ms=overhead_ms,
                     skipped=skipped, upstream_failed=upstream_failed)
        user_text = protocol.new_user_turn(body) if body else ""
        if not ok or not writes_back or not (user_text or answer) or actor.key_id is None:
            return
        msgs = protocol.messages(body)
        session = writeback.session_key_for(agent_id=actor.id, explicit=explicit_session,
                                            first_user_text=protocol.first_user_text(body))
        turns = writeback.turns_for(session_key=session, position=len(msgs), user_text=user_text,
                                    answer=answer, model=str(body.get("model", "")))
        writeback.enqueue(key_id=actor.key_id, session_key=session, turns=turns)

    def failed(exc: Exception, stage: str) -> JsonResponse:
        # counted like any request (memory was built and injected or not all the same), nothing
        # written back: no answer came
        _background(after, "", False, True, request_id=getattr(request, "request_id", None))
        return _upstream_failed(request, protocol_name, memory, exc, stage)

    client = _upstream_client()
    try:
        upstream_req = client.build_request("POST", upstream_url, content=payload, headers=headers)
        upstream = await client.send(upstream_req, stream=True)
    except httpx.HTTPError as exc:
        return failed(exc, "connecting")

    is_stream = "text/event-stream" in upstream.headers.get("content-type", "")
    if is_stream:
        return _stream(upstream, protocol, memory, bundle, after, request, writes_back)

    try:
        content = await upstream.aread()
    except httpx.HTTPError as exc:
        return failed(exc, "reading the answer")
    finally:
        await upstream.aclose()
    status = upstream.status_code
    answer_json = None
    if upstream.is_success and body is not None:
        try:
            answer_json = json.loads(content)
        except ValueError:
            answer_json = None
    if tools and isinstance(answer_json, dict):
        try:
            answer_json, content, status = await _tool_rounds(client, upstream_url, headers, protocol, actor,
                                                              sent_body, answer_json, content, status)
        except httpx.HTTPError as exc:
            # the first answer held only our tool calls: the caller cannot use it, so no partial 200
            return failed(exc, "answering a memory tool call")
    response = HttpResponse(content, status=status,
                            content_type=upstream.headers.get("content-type", "application/json"))
    _copy_headers(upstream, response, memory, bundle, writes_back)
    answer = protocol.answer_text(answer_json) if isinstance(answer_json, dict) and status < 300 else ""
    _background(after, answer, status < 300, request_id=getattr(request, "request_id", None))
    return response


async def _tool_rounds(client, url, headers, protocol, actor, sent_body, answer, content, status):
    """Answer the model's calls of the memory tool here (at most 3 rounds), so the caller only ever
    sees calls of its own tools. Returns (answer json, bytes, status)."""
    changed = False
    for _ in range(MAX_TOOL_ROUNDS):
        ours, others = protocol.our_tool_calls(answer)
        if not ours:
            break
        if others:  # the caller must answer its own calls; ours are dropped from what it sees
            answer, changed = protocol.strip_ours(answer), True
            break
        results = []
        for call in ours:
            results.append((call["id"], await _in_thread(run_tool, actor=actor, name=call["name"],
                                                         args=call["input"])))
        sent_body = protocol.continue_with(sent_body, answer, results)
        r = await client.post(url, content=json.dumps(sent_body).encode(), headers=headers)
        content, status = r.content, r.status_code
        try:
            answer = r.json()
        except ValueError:
            return None, content, status
        if not r.is_success:
            return answer, content, status
    else:
        ours, others = protocol.our_tool_calls(answer)
        if ours:  # budget spent: what is left of the answer, without our calls
            answer, changed = protocol.strip_ours(answer), True
    if changed:
        content = json.dumps(answer).encode()
    return answer, content, status


def _stream(upstream: httpx.Response, protocol, memory: str, bundle, after, request,
            writes_back: bool = True) -> StreamingHttpResponse:
    capture = upstream.is_success

    async def relay():
        kept: list[bytes] = []
        size = 0
        completed = failed = False
        recent = b"\n\n"  # the last bytes relayed, whether captured or not
        try:
            # Decoded bytes: Content-Encoding is not relayed (DROP_RESPONSE), and an upstream may
            # compress although the request asked for identity.
            async for chunk in upstream.aiter_bytes():
                if capture and size < MAX_CAPTURE:
                    kept.append(chunk)
                    size += len(chunk)
                if chunk:
                    recent = (recent + chunk[-256:])[-256:]
                yield chunk
            completed = True
        except httpx.HTTPError as exc:
            # The status line is already sent, so no 502 now: end the stream with the protocol's own
            # error event (the one error shape inside), which the SDKs raise as an API error instead
            # of taking the truncated answer for a finished one (nor is it written back, below).
            log.warning("proxy: upstream %s failed mid-stream: %s", protocol.name, type(exc).__name__)
            if protocol.stream_end not in recent:  # a failure after the last event lost nothing
                failed = True
                body = error_body("upstream_unavailable", _UPSTREAM_FAILED.format(protocol.name),
                                  request=request)
                # an upstream chunk cut mid-event is closed first, so the error event parses on its own
                yield (b"" if recent.endswith(b"\n\n") else b"\n\n") + protocol.stream_error(body)
        finally:
            # Callers hang up as soon as they read the protocol's last event ([DONE] /
            # message_stop), often before the upstream closes: that is a finished answer too.
            data = b"".join(kept)
            if completed or protocol.stream_end in data[-256:]:
                _background(after, _parse_sse(data, protocol) if capture else "", capture,
                            request_id=getattr(request, "request_id", None))
            else:  # cut short (the upstream failed, or the caller left): counted, never written back
                _background(after, "", False, failed, request_id=getattr(request, "request_id", None))
            await upstream.aclose()

    response = StreamingHttpResponse(relay(), status=upstream.status_code,
                                     content_type=upstream.headers.get("content-type", "text/event-stream"))
    _copy_headers(upstream, response, memory, bundle, writes_back)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


async def _relay_get(request, protocol_name: str, model: str):
    """A read-only upstream route (the model list) relayed as is, behind the same key check and
    rate limit as the chat routes. OpenAI-compatible clients list ``/models`` to check a base URL
    and pick a model; without this they got Django's HTML 404 page."""
    if request.method != "GET":
        return _error(405, "method_not_allowed", "GET only.", request)
    raw_key = request.headers.get("X-Nylon-Key", "")
    if not raw_key:
        return _error(401, "not_authenticated", "Send your Nylon agent key in X-Nylon-Key.", request)
    try:
        await _check_key(raw_key)
    except _AuthFailed:
        return _error(401, "authentication_failed", "Invalid or revoked Nylon key.", request)
    except _RateLimited as exc:
        return _throttled(request, exc.wait)
    except _AuthUnavailable:
        return _auth_unavailable(request)
    subpath = _models_path(model)
    if subpath is None:
        return _error(400, "invalid", "Not a model id: a model id is one path segment.", request)
    url = getattr(settings, f"NYLON_PROXY_{protocol_name.upper()}_UPSTREAM").rstrip("/") + subpath
    if request.META.get("QUERY_STRING"):
        url += "?" + request.META["QUERY_STRING"]
    try:
        upstream = await _upstream_client().get(url, headers=_forward_headers(request))
    except httpx.HTTPError as exc:
        return _upstream_failed(request, protocol_name, "none", exc, "connecting")
    response = HttpResponse(upstream.content, status=upstream.status_code,
                            content_type=upstream.headers.get("content-type", "application/json"))
    _relay_headers(upstream, response)
    return response


# URL-safe characters a model id may keep as is; anything else is percent-encoded in the upstream URL.
_MODEL_SAFE = ":@!$&'()*+,;=-._~"


def _models_path(model: str) -> str | None:
    """``/models`` or ``/models/{id}`` for the upstream; None for an id that is not one path
    segment. The id arrives percent-decoded (``..%2F..%2Fsecret`` is ``../../secret`` here), and the
    upstream URL is built by joining strings: a '/' or '..' in it walked the relayed GET out of
    ``/models`` to any path of the provider, with the caller's credentials. So '/', '\\', '.',
    '..', '%' (an encoded character already decoded once, e.g. ``%252F``) and control characters
    are refused, and the rest is encoded so '?' or '#' cannot start a query or a fragment."""
    if not model:
        return "/models"
    if (model == "." or ".." in model or any(c in model for c in "/\\%")
            or any(ord(c) < 0x20 or ord(c) == 0x7F for c in model)):
        return None
    return "/models/" + quote(model, safe=_MODEL_SAFE)


@csrf_exempt
async def openai_models(request, model: str = ""):
    return await _relay_get(request, "openai", model)


@csrf_exempt
async def anthropic_models(request, model: str = ""):
    return await _relay_get(request, "anthropic", model)


@csrf_exempt
def unknown(request, rest: str = ""):
    """Any other path under /proxy/: the proxy's JSON error, which LLM SDKs can read, not the
    console's HTML 404 page."""
    return _error(404, "no_endpoint", "No such proxy endpoint. The proxy serves POST "
                  "/proxy/openai/v1/chat/completions, POST /proxy/anthropic/v1/messages and GET …/v1/models.",
                  request)


@csrf_exempt
async def openai_chat_completions(request):
    return await _proxy(request, "openai")


@csrf_exempt
async def anthropic_messages(request):
    return await _proxy(request, "anthropic")


