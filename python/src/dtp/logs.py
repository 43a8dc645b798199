"""Log lines of the worker, with ``logging``: ``time LEVEL logger: message key=value ...``
(or one JSON object a line). Fields travel in ``extra={"fields": {...}}``; the
job and attempt of a handler's own lines are added as ``job_id`` and
``attempt_id``.

A message or field longer than 8 KiB (``MAX_ERROR_CHARS`` characters, much of
it possibly a peer's) is cut there and marked ``... (truncated)``, as an
attempt's error is, so one line stays small whatever a coordinator or a handler
sends; and a character UTF-8 cannot carry (a lone surrogate) is written
escaped instead of failing the line.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from typing import Any

from .protocol import truncate_error

_RESERVED = ("job_id", "attempt_id")


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name in _RESERVED:
        value = getattr(record, name, None)
        if value is not None:
            fields[name] = value
    extra = getattr(record, "fields", None)
    if isinstance(extra, Mapping):
        fields.update({k: v for k, v in extra.items() if v is not None})
    return fields


def _text(value: Any) -> str:
    """A field's text, cut to the limit."""
    if isinstance(value, str):
        return truncate_error(value)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return truncate_error(text)


def _value(value: Any) -> str:
    text = _text(value)
    if text == "" or any(c in text for c in ' "=\n\t'):
        return json.dumps(text, ensure_ascii=False)
    return text


def _json_value(value: Any) -> Any:
    """A field as the JSON format holds it: plain values as they are, long text cut."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return truncate_error(value)
    return _text(value)


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line = f"{stamp}.{int(record.msecs):03d}Z {record.levelname} {record.name}: "
        line += truncate_error(record.getMessage())
        fields = _fields(record)
        if fields:
            line += " " + " ".join(f"{k}={_value(v)}" for k, v in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": int(record.created * 1000),
            "level": record.levelname.lower(),
            "name": record.name,
            "msg": truncate_error(record.getMessage()),
        }
        out.update((k, _json_value(v)) for k, v in _fields(record).items())
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def setup(level: str = "info", fmt: str = "text", stream: Any | None = None) -> int:
    """Sends the root logger's lines to ``stream`` (stdout) in the chosen format."""
    out = stream or sys.stdout
    reconfigure = getattr(out, "reconfigure", None)
    if callable(reconfigure):
        reconfigure(errors="backslashreplace")  # a lone surrogate from a peer, escaped
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    numeric = LEVELS[level]
    root.setLevel(numeric)
    return numeric
