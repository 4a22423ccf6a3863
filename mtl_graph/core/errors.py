"""One exception base for everything mtl_graph raises, the one-line error of a bad setting, and the typed reason a
run ended without a fair try."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from pydantic import ValidationError


class MTLError(Exception):
    """Base of every error mtl_graph raises on purpose: `except MTLError` catches ours and nothing else.

    Each subclass also keeps the builtin base it always had (ValueError, RuntimeError, OSError), so code that
    catches those still does."""


class SettingsError(MTLError, ValueError):
    """A setting (keyword, context, flag or environment variable) has a bad value or an unknown name: one line.

    Here, below every package, because the lowest reader of settings (the process's environment, read by the
    memory pool) raises it as well as the configuration does."""


MAX_SHOWN = 80
"""Characters of a bad value shown in its error line."""


def describe_error(exc: ValidationError, label: Callable[[tuple], str]) -> str:
    """One line for a validation error: the setting (named by `label(loc)`), the value given and what is wrong."""
    errors = exc.errors()
    first = errors[0]
    what = label(tuple(first["loc"]))
    if first["type"] == "extra_forbidden":
        line = f"unknown setting {what}"
    else:
        message = first["msg"].removeprefix("Value error, ")  # a validator's own words, without pydantic's tag
        message = message[0].lower() + message[1:]
        given = repr(first["input"])  # repr keeps it on one line; a long one is cut
        line = f"invalid {what} {given if len(given) <= MAX_SHOWN else given[:MAX_SHOWN] + '...'}: {message}"
    return line + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else "")


class ErrorKind(StrEnum):
    """Which stage a run's expected failure came from; the run's verdict is then `error` and it teaches nothing."""

    INVALID_TASK = "invalid_task"
    INVALID_SETTINGS = "invalid_settings"
    MODEL = "model"
    RETRIEVAL = "retrieval"
    SETUP = "setup"
    AGENT = "agent"
    CHECK = "check"
    JUDGE = "judge"
    WRITE_BACK = "write_back"
    REFUSED = "refused"
    DECLINED = "declined"
    CRASHED = "crashed"
    OTHER = "other"


_PREFIX = {
    ErrorKind.INVALID_TASK: "invalid task",
    ErrorKind.INVALID_SETTINGS: "invalid agent settings",
    ErrorKind.MODEL: "model provider error",
    ErrorKind.RETRIEVAL: "retrieval failed",
    ErrorKind.AGENT: "wrapped agent failed",
    ErrorKind.CHECK: "check could not run",
    ErrorKind.WRITE_BACK: "write back failed",
    ErrorKind.REFUSED: "refused",
}
"""The text a kind's message starts with in the run's `error` (the words users and logs have always seen)."""


@dataclass(frozen=True)
class RunError:
    """Why a run stopped short: a kind to branch on and a message for people. `text` is the run's `error`."""

    kind: ErrorKind
    """The stage that failed."""
    detail: str
    """What went wrong, in that stage's words."""

    @property
    def text(self) -> str:
        prefix = _PREFIX.get(self.kind)
        return f"{prefix}: {self.detail}" if prefix else self.detail

    def update(self) -> dict[str, str]:
        """The run-state fields that record it: `error` (the text) and `error_kind`."""
        return {"error": self.text, "error_kind": self.kind.value}

    def __str__(self) -> str:
        return self.text


def failure(kind: ErrorKind, detail: str) -> dict[str, str]:
    """A stage's state update for an expected failure: the run's `error` text and its `error_kind`."""
    return RunError(kind=kind, detail=detail).update()


def error_kind_of(text: str | None) -> ErrorKind | None:
    """The kind of a run's `error` text (for runs logged before kinds were recorded, and state a client wrote)."""
    if not text:
        return None
    for kind, prefix in _PREFIX.items():
        if text.startswith(f"{prefix}:"):
            return kind
    if " raised " in text.split(":", 1)[0]:
        return ErrorKind.CRASHED
    return ErrorKind.OTHER
