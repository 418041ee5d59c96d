"""Keeps invitation and password-reset tokens out of the logs (settings.LOGGING wires it on the
console handler)."""

from __future__ import annotations

import logging
import re

# The token is the whole credential of an invitation link (``/invite/<token>``). Django logs each
# 4xx answer with its path (and a CSRF refusal with its own line), and a link that was answered
# 400 (a password too short) or 403 (opened by another account) still works.
INVITE_TOKEN = re.compile(r"(/invite/)[^/\s?#\"'<>]+")
# A password-reset link, /reset/<uid>/<token>/ (Django then redirects to /reset/<uid>/set-password/,
# which holds no secret).
RESET_TOKEN = re.compile(r"(/reset/[^/\s?#\"'<>]+/)(?!set-password/)[^/\s?#\"'<>]+")


class InviteTokenFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed call is the handler's to report (handleError), not ours
            return True
        if "/invite/" in message or "/reset/" in message:
            message = RESET_TOKEN.sub(r"\1<token>", INVITE_TOKEN.sub(r"\1<token>", message))
            record.msg, record.args = message, ()
        return True
