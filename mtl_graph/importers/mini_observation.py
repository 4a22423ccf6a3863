"""mini-swe-agent observations as text, every block kept.

mini renders a command's result with a template. Text mode (v1 and v2):
``<exception>`` (v2, optional), ``<returncode>``, then either ``<output>`` or, for long output, ``<warning>``,
``<output_head>``, ``<elided_chars>N characters elided</elided_chars>``, ``<output_tail>``. Tool-call mode (v2)
renders the same fields as a JSON object. v2 also stores the untruncated output in ``extra.raw_output``, which
is used when present. Anything outside the known blocks is kept as it is.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mtl_graph.importers.common import text_of

_BLOCK = re.compile(r"<(exception|returncode|output|output_head|elided_chars|output_tail|warning)>\n?(.*?)\n?</\1>", re.S)
_FIELDS = ("exception", "exception_info", "returncode", "output", "output_head", "elided_chars", "output_tail",
           "warning")


def cut_marker(n: int | None) -> str:
    """The line that stands where characters were cut (the same wording the trajectory renderer uses)."""
    return f"[... {n} characters cut ...]" if n is not None else "[... characters cut ...]"


def _int(value: Any) -> int | None:
    m = re.search(r"-?\d+", str(value)) if value is not None else None
    return int(m.group(0)) if m else None


def _render(blocks: dict[str, str], rest: str = "") -> str:
    parts = []
    exception = blocks.get("exception") or blocks.get("exception_info")
    if exception:
        parts.append(f"[exception] {str(exception).strip()}")
    if blocks.get("warning"):
        parts.append(f"[warning] {str(blocks['warning']).strip()}")
    if "output" in blocks:
        parts.append(str(blocks["output"]))
    if "output_head" in blocks or "output_tail" in blocks:
        parts += [str(blocks.get("output_head", "")), cut_marker(_int(blocks.get("elided_chars"))),
                  str(blocks.get("output_tail", ""))]
    if rest.strip():
        parts.append(rest.strip())
    return "\n".join(parts)


def _json_blocks(content: str) -> dict[str, Any] | None:
    """The observation fields of a tool-call-mode observation, when the content is that JSON object."""
    if not content.lstrip().startswith("{"):
        return None
    try:
        obj = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if isinstance(obj, dict) and "returncode" in obj and obj.keys() <= set(_FIELDS):
        return obj
    return None


def parse_observation(message: dict[str, Any]) -> tuple[str, int | None, bool]:
    """(observation text, exit code, whether the message was a rendered command result at all)."""
    content = text_of(message.get("content"))
    extra = message.get("extra") if isinstance(message.get("extra"), dict) else {}
    if isinstance(extra.get("raw_output"), str):  # v2: the whole output, nothing elided
        blocks = {"output": extra["raw_output"], "exception": extra.get("exception_info") or ""}
        return _render(blocks), _int(extra.get("returncode")), True
    blocks = _json_blocks(content)
    if blocks is not None:
        return _render(blocks), _int(blocks.get("returncode")), True
    found = {m.group(1): m.group(2) for m in _BLOCK.finditer(content)}
    if not found:
        return content, None, False
    return _render(found, _BLOCK.sub("", content)), _int(found.get("returncode")), True
