"""LLM providers over httpx: OpenAI-compatible chat completions (OpenAI, DeepSeek, Ollama, vLLM,
llama.cpp) and Anthropic messages.

Every call asks for JSON and validates it against a small JSON schema. Timeouts are bounded;
429, 5xx, timeouts and connection errors are retried with exponential backoff (``Retry-After``
is honoured up to a cap); 401/402 are not retried. Token usage is counted per org and day
(``LlmUsage``). The provider state (ok / degraded with the last error class / disabled) lives in
Redis, so every web process and worker reports the same thing in ``/healthz``.

Configuration: ``NYLON_LLM_URL`` / ``_PROVIDER`` / ``_MODEL`` / ``_KEY`` / ``_TIMEOUT_SECS`` /
``_MAX_RETRIES``, overridable per org by ``Organization.settings["llm"]`` (same keys in lower case
without the prefix: ``url``, ``provider``, ``model``, ``key``, ``timeout_secs``, ``max_retries``;
``{"enabled": false}`` turns the LLM off for that org).
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from dataclasses import dataclass, replace
from datetime import date
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.db.models import F

from nylon_project import namespace

log = logging.getLogger("nylon.llm")

PROVIDERS = ("openai", "anthropic")
ANTHROPIC_VERSION = "2023-06-01"
STATE_TTL = 7 * 86400


# ---------------------------------------------------------------------------------------------
# configuration


@dataclass(frozen=True)
class LlmConfig:
    provider: str
    url: str
    model: str
    key: str = ""
    timeout_secs: float = 30.0
    max_retries: int = 3
    scope: str = "default"  # "default" (settings) or "org<id>" (per-org override)

    @property
    def endpoint(self) -> str:
        base = self.url.rstrip("/")
        tail = "/chat/completions" if self.provider == "openai" else "/messages"
        if base.endswith(tail):
            return base
        if re.search(r"/v\d+$", base):
            return base + tail
        return base + "/v1" + tail

    @property
    def host(self) -> str:
        """host[:port] for display (state, /healthz, background/status, logs). Never the userinfo:
        ``https://user:secret@gateway/v1`` is a valid URL, and its password must not reach every
        agent key that reads background/status."""
        return display_host(self.url)


def display_host(url: str) -> str:
    parts = urlsplit(url if "//" in url else "//" + url)
    return parts.netloc.rpartition("@")[2] or "(no host)"


def _redact(text: str, cfg: LlmConfig) -> str:
    """An error text without the URL's credentials (httpx names the URL in some of its errors)."""
    userinfo = urlsplit(cfg.url if "//" in cfg.url else "//" + cfg.url).netloc.rpartition("@")[0]
    return text.replace(userinfo + "@", "***@") if userinfo else text


def _default_config() -> LlmConfig | None:
    url = (settings.NYLON_LLM_URL or "").strip()
    if not url:
        return None
    provider = (settings.NYLON_LLM_PROVIDER or "openai").strip().lower()
    if provider not in PROVIDERS:
        # settings refuse it at start; settings made another way used to get openai without a word
        raise ImproperlyConfigured(f"NYLON_LLM_PROVIDER: {settings.NYLON_LLM_PROVIDER!r} is not one of "
                                   f"{', '.join(PROVIDERS)}")
    return LlmConfig(provider=provider, url=url,
                     model=settings.NYLON_LLM_MODEL or "", key=settings.NYLON_LLM_KEY or "",
                     timeout_secs=float(settings.NYLON_LLM_TIMEOUT_SECS),
                     max_retries=int(settings.NYLON_LLM_MAX_RETRIES))


def config_for(org=None) -> LlmConfig | None:
    """The LLM an org uses, or None when it has none (heuristic fallbacks apply)."""
    base = _default_config()
    over = (getattr(org, "settings", None) or {}).get("llm") if org is not None else None
    if not isinstance(over, dict) or not over:
        return base
    if over.get("enabled") is False:
        return None
    provider = str(over.get("provider") or (base.provider if base else "openai")).lower()
    url = str(over.get("url") or (base.url if base else "")).strip()
    if not url or provider not in PROVIDERS:
        return None
    cfg = base or LlmConfig(provider=provider, url=url, model="",
                            timeout_secs=float(settings.NYLON_LLM_TIMEOUT_SECS),
                            max_retries=int(settings.NYLON_LLM_MAX_RETRIES))
    try:
        return replace(
            cfg, provider=provider, url=url, model=str(over.get("model", cfg.model if base else "")),
            key=str(over.get("key", cfg.key if base else "")),
            timeout_secs=max(0.1, min(float(over.get("timeout_secs", cfg.timeout_secs)), 300.0)),
            max_retries=max(0, min(int(over.get("max_retries", cfg.max_retries)), 10)),
            scope=f"org{org.pk}",
        )
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------
# errors and state


class LlmError(Exception):
    """A failed LLM call. ``kind`` is the error class shown in the state."""

    retryable_kinds = {"rate_limited", "server_error", "timeout", "connection", "malformed_json"}

    def __init__(self, kind: str, message: str, *, http_status: int | None = None,
                 retry_after: float | None = None):
        super().__init__(f"{kind}: {message}"[:500])
        self.kind, self.http_status, self.retry_after = kind, http_status, retry_after

    # Raised after the call's own retries: the endpoint (its credit, key, gateway, reachability)
    # is the problem, not this prompt, so the next call of the same task would only wait the same
    # retries out. A malformed answer or a 400 belongs to its prompt and may not repeat.
    lasting_kinds = {"rate_limited", "server_error", "timeout", "connection", "unauthorized", "out_of_credit",
                     "bad_response"}

    @property
    def retryable(self) -> bool:
        return self.kind in self.retryable_kinds

    @property
    def lasting(self) -> bool:
        return self.kind in self.lasting_kinds


class LlmDisabled(Exception):
    """No LLM is configured for this org."""


# The state is kept per task kind (the ``TASK:`` line of the prompt). One shared "last outcome"
# let any success erase any failure: an abstraction answered with no usable facts (or refused with
# a 400 every time) was marked degraded, and the next conflict judge or probe call set it back to
# ok. Now a kind stays degraded until that kind succeeds again, and the LLM is degraded while any
# kind is.
TASK_KINDS = ("probe", "abstract", "conflict", "reflect", "other")


def task_of(system: str) -> str:
    m = re.search(r"TASK:\s*(\w+)", system or "")
    return m.group(1) if m and m.group(1) in TASK_KINDS else "other"


def _state_key(scope: str, task: str) -> str:
    # Shared by every process of the instance (workers write it, web's /healthz reads it), apart from
    # other instances on the same Redis (namespace.state_scope).
    return f"llm-state:{namespace.state_scope()}:{scope}:{task}"


def _cache():
    from django.core.cache import cache

    return cache


def _write_state(cfg: LlmConfig, task: str, **fields) -> None:
    try:
        c = _cache()
        key = _state_key(cfg.scope, task)
        state = c.get(key) or {}
        state.update(fields)
        c.set(key, state, STATE_TTL)
    except Exception as exc:  # state is best effort; Redis down must not break the caller
        log.warning("llm state not recorded: %s", exc)


def _mark_ok(cfg: LlmConfig, task: str, detail: str = "") -> None:
    _write_state(cfg, task, status="ok", last_ok_at=time.time(), detail=detail[:300])


def _mark_failed(cfg: LlmConfig, task: str, err: LlmError) -> None:
    _write_state(cfg, task, status="degraded", last_error=err.kind, http_status=err.http_status,
                 last_error_at=time.time(), detail=str(err)[:300])


def mark_degraded(org, task: str, kind: str, message: str) -> None:
    """Work of this kind fell back to heuristics although the call itself may have succeeded (an
    answer citing no turn, no facts at all, an abstraction given up after its attempts): the state
    must not say ok, and stays degraded until work of this kind succeeds with the LLM again."""
    cfg = config_for(org)
    if cfg is not None:
        _mark_failed(cfg, task, LlmError(kind, message))


def mark_unusable(org, message: str) -> None:
    mark_degraded(org, "abstract", "unusable_answer", message)


def llm_state(org=None) -> dict:
    """{"status": ok|degraded|disabled|unknown, "provider", "model", "endpoint", "last_error",
    "detail", "tasks": {kind: its own state}}. Degraded while any task kind's last outcome is a
    failure; last_error is the newest failure among those kinds, detail names each of them."""
    cfg = config_for(org)
    if cfg is None:
        return {"status": "disabled", "detail": "no LLM configured: heuristic fallbacks in use"}
    out = {"status": "unknown", "detail": "not probed yet", "last_error": None}
    try:
        keys = {_state_key(cfg.scope, t): t for t in TASK_KINDS}
        tasks = {keys[k]: v for k, v in _cache().get_many(list(keys)).items()}
    except Exception as exc:
        tasks = {}
        out.update(detail=f"state unavailable: {exc}"[:300])
    tasks = {t: tasks[t] for t in TASK_KINDS if t in tasks}
    failing = sorted(((t, s) for t, s in tasks.items() if s.get("status") == "degraded"),
                     key=lambda ts: -(ts[1].get("last_error_at") or 0))
    if failing:
        newest = failing[0][1]
        out.update(status="degraded", last_error=newest.get("last_error"), http_status=newest.get("http_status"),
                   last_error_at=newest.get("last_error_at"), degraded_tasks=[t for t, _ in failing],
                   detail="; ".join(f"{t}: {s.get('detail', '')}" for t, s in failing)[:1000])
    elif tasks:
        out.update(status="ok", detail="; ".join(f"{t}: {s['detail']}" for t, s in tasks.items() if s.get("detail")))
    oks = [s["last_ok_at"] for s in tasks.values() if s.get("last_ok_at")]
    if oks:
        out["last_ok_at"] = max(oks)
    out.update(tasks=tasks, provider=cfg.provider, model=cfg.model, endpoint=cfg.host)
    return out


def reset_state(org=None) -> None:
    cfg = config_for(org)
    if cfg is not None:
        try:
            _cache().delete_many([_state_key(cfg.scope, t) for t in TASK_KINDS])
        except Exception:
            pass


# ---------------------------------------------------------------------------------------------
# usage


def _record_usage(org_id: int | None, cfg: LlmConfig, *, prompt: int = 0, completion: int = 0,
                  error: bool = False) -> None:
    from .models import LlmUsage

    key = {"org_id": org_id, "day": date.today(), "provider": cfg.provider, "model": cfg.model[:200]}
    try:
        with transaction.atomic():
            if not LlmUsage.objects.filter(**key).exists():
                try:
                    with transaction.atomic():
                        LlmUsage.objects.create(**key)
                except IntegrityError:
                    pass  # a concurrent writer created it
            LlmUsage.objects.filter(**key).update(
                calls=F("calls") + (0 if error else 1), errors=F("errors") + (1 if error else 0),
                prompt_tokens=F("prompt_tokens") + prompt, completion_tokens=F("completion_tokens") + completion,
            )
    except Exception as exc:  # accounting must not fail the work it accounts for
        log.warning("llm usage not recorded: %s", exc)


# ---------------------------------------------------------------------------------------------
# JSON schema (the small subset the prompts use)


def validate(value, schema: dict, path: str = "$") -> None:
    """Raise ValueError when ``value`` does not match ``schema`` (type, required, properties,
    additionalProperties, items, enum, minItems, maxItems, minLength, maxLength, minimum, maximum)."""
    types = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
    t = schema.get("type")
    if t is not None:
        allowed = t if isinstance(t, list) else [t]
        ok = False
        for name in allowed:
            if name == "integer":
                ok |= isinstance(value, int) and not isinstance(value, bool)
            elif name == "number":
                ok |= isinstance(value, int | float) and not isinstance(value, bool)
            else:
                ok |= isinstance(value, types[name])
        if not ok:
            raise ValueError(f"{path}: expected {t}, got {type(value).__name__}")
    if "enum" in schema and value not in schema["enum"]:
        raise ValueError(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, dict):
        for name in schema.get("required", []):
            if name not in value:
                raise ValueError(f"{path}: missing {name!r}")
        props = schema.get("properties", {})
        for name, sub in value.items():
            if name in props:
                validate(sub, props[name], f"{path}.{name}")
            elif schema.get("additionalProperties") is False:
                raise ValueError(f"{path}: unexpected {name!r}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", 1 << 30):
            raise ValueError(f"{path}: {len(value)} items out of bounds")
        if "items" in schema:
            for i, item in enumerate(value):
                validate(item, schema["items"], f"{path}[{i}]")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", 1 << 30):
            raise ValueError(f"{path}: string length out of bounds")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if value < schema.get("minimum", float("-inf")) or value > schema.get("maximum", float("inf")):
            raise ValueError(f"{path}: {value} out of bounds")


def parse_json_text(text: str) -> object:
    """The JSON object in a model's answer (code fences and chatter around it are tolerated)."""
    s = (text or "").strip()
    fence = re.match(r"^```(?:json)?\s*(.*?)\s*```$", s, re.S)
    if fence:
        s = fence.group(1)
    try:
        return json.loads(s)
    except ValueError:
        pass
    i, j = s.find("{"), s.rfind("}")
    if i >= 0 and j > i:
        try:
            return json.loads(s[i:j + 1])
        except ValueError:
            pass
    raise LlmError("malformed_json", f"answer is not JSON: {s[:120]!r}")


# ---------------------------------------------------------------------------------------------
# the call


def _sleep(secs: float) -> None:  # patched in tests
    time.sleep(secs)


def _retry_after(resp: httpx.Response) -> float | None:
    raw = resp.headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(raw).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _request(cfg: LlmConfig, system: str, user: str, max_tokens: int) -> tuple[dict, dict]:
    if cfg.provider == "anthropic":
        headers = {"x-api-key": cfg.key, "anthropic-version": ANTHROPIC_VERSION}
        body = {"model": cfg.model or "claude-haiku-4-5", "max_tokens": max_tokens, "temperature": 0,
                "system": system + "\nAnswer with one JSON object only, no prose.",
                "messages": [{"role": "user", "content": user}]}
    else:
        headers = {"Authorization": f"Bearer {cfg.key}"} if cfg.key else {}
        body = {"model": cfg.model or "default", "max_tokens": max_tokens, "temperature": 0,
                "response_format": {"type": "json_object"},
                "messages": [{"role": "system", "content": system + "\nAnswer with one JSON object only."},
                             {"role": "user", "content": user}]}
    return headers, body


class LlmBadResponse(LlmError):
    """A 200 whose body is not the provider's answer shape (``choices`` of strings, ``message`` as
    a string, unreadable content). A subclass of LlmError, so every caller's failure path runs
    (state degraded, attempt counted, heuristic or rule fallback) instead of a raw AttributeError
    escaping the task and the tick re-sending it forever. Not retried within the call: the same
    gateway answers the same shape again; the callers' schedules retry later."""

    def __init__(self, message: str, *, http_status: int | None = None):
        super().__init__("bad_response", message, http_status=http_status)


def _text_of(content, where: str) -> str:
    """A message's text. OpenAI-compatible gateways (and Anthropic) may send the content as a list
    of parts; the text parts are joined and other parts (images, tool use, thinking) ignored."""
    if content is None:
        return ""  # no text (e.g. a refusal): reported as malformed_json by the JSON step
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise LlmBadResponse(f"{where} is a {type(content).__name__}, not text or a list of parts")
    texts = []
    for i, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            if part.get("type", "text") in ("text", "output_text"):
                text = part.get("text")
                if not isinstance(text, str):
                    raise LlmBadResponse(f"{where}[{i}].text is not a string")
                texts.append(text)
        else:
            raise LlmBadResponse(f"{where}[{i}] is a {type(part).__name__}, not a content part")
    return "".join(texts)


def _tokens(usage, name: str) -> int | None:
    """A token count, or None when the provider sent something that is not one. Accounting must
    not fail the work it accounts for, so an unreadable count costs the count, not the answer
    (the caller makes it visible in the state's detail)."""
    value = usage.get(name)
    if value is None:
        return 0
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, float) and value.is_integer():
        return max(0, int(value))
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _answer(cfg: LlmConfig, payload) -> tuple[str, int, int, bool, str]:
    """(text, prompt tokens, completion tokens, truncated, usage note) from a provider response
    body; LlmBadResponse when the body is not an answer of the provider's shape."""
    if not isinstance(payload, dict):
        raise LlmBadResponse(f"body is a {type(payload).__name__}, not an object")
    if cfg.provider == "anthropic":
        text = _text_of(payload.get("content"), "content")
        names, truncated = ("input_tokens", "output_tokens"), payload.get("stop_reason") == "max_tokens"
    else:
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices:
            raise LlmBadResponse("no choices in the body" if not choices else
                                 f"choices is a {type(choices).__name__}, not a list")
        choice = choices[0]
        if not isinstance(choice, dict):
            raise LlmBadResponse(f"choices[0] is a {type(choice).__name__}, not an object")
        message = choice.get("message")
        if not isinstance(message, dict):
            raise LlmBadResponse(f"choices[0].message is a {type(message).__name__}, not an object")
        text = _text_of(message.get("content"), "choices[0].message.content")
        names, truncated = ("prompt_tokens", "completion_tokens"), choice.get("finish_reason") == "length"
    usage = payload.get("usage") or {}
    counts = [_tokens(usage, n) for n in names] if isinstance(usage, dict) else [None, None]
    bad = [n for n, c in zip(names, counts, strict=True) if c is None]
    note = f"usage not counted: unreadable {', '.join(bad) if isinstance(usage, dict) else 'usage'}" if bad else ""
    return text, counts[0] or 0, counts[1] or 0, truncated, note


def _once(cfg: LlmConfig, client: httpx.Client, system: str, user: str, schema: dict,
          max_tokens: int) -> tuple[dict, int, int, str]:
    headers, body = _request(cfg, system, user, max_tokens)
    try:
        resp = client.post(cfg.endpoint, json=body, headers=headers)
    except httpx.TimeoutException as exc:
        raise LlmError("timeout", f"no answer within {cfg.timeout_secs}s ({type(exc).__name__})") from exc
    except httpx.HTTPError as exc:
        raise LlmError("connection", _redact(f"{type(exc).__name__}: {exc}", cfg)) from exc
    code = resp.status_code
    if code in (401, 403):
        raise LlmError("unauthorized", f"HTTP {code}: key refused", http_status=code)
    if code == 402:
        raise LlmError("out_of_credit", "HTTP 402: payment required (out of credit)", http_status=code)
    if code == 429:
        raise LlmError("rate_limited", "HTTP 429: rate limited", http_status=code, retry_after=_retry_after(resp))
    if code >= 500:
        raise LlmError("server_error", f"HTTP {code}", http_status=code, retry_after=_retry_after(resp))
    if code >= 400:
        raise LlmError("bad_request", f"HTTP {code}: {resp.text[:200]}", http_status=code)
    try:
        payload = resp.json()
    except ValueError as exc:
        raise LlmError("malformed_json", "response body is not JSON", http_status=code) from exc
    try:
        text, p_tok, c_tok, truncated, note = _answer(cfg, payload)
    except LlmBadResponse as exc:
        exc.http_status = code
        raise
    except Exception as exc:  # any shape not foreseen above still takes the failure path
        raise LlmBadResponse(f"unreadable body ({type(exc).__name__}: {exc})", http_status=code) from exc
    try:
        data = parse_json_text(text)
    except LlmError as exc:
        if truncated:
            exc.args = (f"malformed_json: answer truncated at max_tokens: {text[:80]!r}",)
        raise
    try:
        validate(data, schema)
    except ValueError as exc:
        raise LlmError("malformed_json", f"answer does not match the schema: {exc}") from exc
    return data, p_tok, c_tok, note


def complete_json(*, org=None, system: str, user: str, schema: dict, max_tokens: int = 1024,
                  cfg: LlmConfig | None = None) -> dict:
    """Ask the org's LLM for a JSON object matching ``schema``; raise LlmDisabled or LlmError. The
    outcome is recorded in the state of the prompt's task kind (its ``TASK:`` line)."""
    cfg = cfg or config_for(org)
    task = task_of(system)
    if cfg is None:
        raise LlmDisabled("no LLM configured")
    org_id = getattr(org, "pk", None)
    timeout = httpx.Timeout(cfg.timeout_secs, connect=min(5.0, cfg.timeout_secs))
    cap = float(settings.NYLON_LLM_RETRY_AFTER_MAX_SECS)
    malformed_retries = 1
    attempt = 0
    with httpx.Client(timeout=timeout) as client:
        while True:
            try:
                data, p_tok, c_tok, note = _once(cfg, client, system, user, schema, max_tokens)
            except LlmError as err:
                _record_usage(org_id, cfg, error=True)
                retry = err.retryable and attempt < cfg.max_retries
                if err.kind == "malformed_json":
                    retry = retry and malformed_retries > 0
                    malformed_retries -= 1
                if retry:
                    wait = min(8.0, 0.5 * 2 ** attempt) * (0.5 + random.random() / 2)
                    if err.retry_after is not None:
                        if err.retry_after > cap:
                            retry = False  # the caller's own schedule retries much later
                        wait = err.retry_after
                if not retry:
                    log.warning("llm %s failed: %s", cfg.host, err)
                    _mark_failed(cfg, task, err)
                    raise
                attempt += 1
                _sleep(wait)
                continue
            _record_usage(org_id, cfg, prompt=p_tok, completion=c_tok)
            if note:
                log.warning("llm %s: %s", cfg.host, note)
            _mark_ok(cfg, task, detail=note)
            return data


PROBE_SYSTEM = 'TASK: probe\nYou are a health check. Reply with the JSON object {"ok": true}.'
PROBE_SCHEMA = {"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}}


def probe(org=None) -> dict:
    """One tiny call; updates and returns the state."""
    cfg = config_for(org)
    if cfg is None:
        return llm_state(org)
    try:
        complete_json(org=org, system=PROBE_SYSTEM, user='Reply {"ok": true}.', schema=PROBE_SCHEMA,
                      max_tokens=64, cfg=replace(cfg, max_retries=min(cfg.max_retries, 1)))
    except LlmError:
        pass
    return llm_state(org)
