"""Nylon Python SDK: ``Client`` (sync), ``AsyncClient`` (asyncio), typed results, one exception
per error kind. The ``nylon`` command line is ``nylon_sdk.cli``."""

from ._core import RetryPolicy, __version__
from .aio import AsyncClient
from .client import Client
from .errors import (
    APIError,
    AuthError,
    ConflictError,
    EndpointUnavailable,
    NotFound,
    NylonError,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    ServerError,
    Timeout,
    TransportError,
    ValidationError,
)
from .types import (
    Conflict,
    Context,
    Explanation,
    Health,
    Hit,
    Node,
    Page,
    RecallItem,
    ResonateResult,
    Turn,
    TurnFieldError,
    WeaveResult,
    with_event_ids,
)

__all__ = [
    "APIError", "AsyncClient", "AuthError", "Client", "Conflict", "ConflictError", "Context", "EndpointUnavailable",
    "Explanation", "Health", "Hit", "Node", "NotFound", "NylonError", "Page", "PayloadTooLarge", "PermissionDenied",
    "RateLimited", "RecallItem", "ResonateResult", "RetryPolicy", "ServerError", "Timeout", "TransportError", "Turn",
    "TurnFieldError", "ValidationError", "WeaveResult", "__version__", "with_event_ids",
]
