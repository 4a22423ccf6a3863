"""Memories as markdown for files agents read, written so that no memory can escape its place.

Memory text is untrusted (another run's model wrote it, or a log file did), and an exported file is read raw by
an agent on every run. So the text of a memory is only ever written as quoted lines (`> `, after the same
defusing and structure marking as the prompt's memory block, memory/fence.py), and every unquoted line the
export writes is made of numbers, enum values and ids. A memory therefore cannot write a heading, an end marker
of the export's section or a line that reads as a role, whatever its line breaks (every Unicode one counts).
Everything written passes redaction again, with today's rules, whatever the pool holds."""

from __future__ import annotations

import re

from mtl_graph.export.selection import Exported
from mtl_graph.memory.fence import quote
from mtl_graph.redaction.redact import redact

_HTML = re.compile(r"<(?=[!/?a-zA-Z])")
"""The start of an HTML comment or tag: a rendered view hides it (`<!-- ... -->`), an agent reading the raw file
does not, so text a reviewer cannot see could still instruct the agent. Escaped, it shows as written."""
OBSERVATION_CHARS = 300
"""Characters of each step's observation a trajectory memory shows (as in the prompt)."""


def quoted(text: str) -> str:
    """Untrusted text as markdown quote lines, redacted and defused, HTML shown rather than hidden."""
    return _HTML.sub(r"\\<", quote(redact(text), prefix="> "))


def provenance(item: Exported) -> str:
    """Where the memory came from, in one line of untrusted text (domains and models are imported strings)."""
    sources = item.memory.sources
    models = sorted({s.task_model for s in sources if s.task_model})
    parts = [f"{len(sources)} source run{'s' * (len(sources) != 1)}"]
    if item.memory.domains:
        parts.append("domains: " + ", ".join(item.memory.domains))
    if models:
        parts.append("models: " + ", ".join(models))
    return "; ".join(parts)


def evidence_line(item: Exported) -> str:
    """The unquoted evidence line: numbers and the memory's id only."""
    return f"Evidence: {item.evidence.sentence()}. Memory id `{item.memory.id}`."


def memory_block(index: int, item: Exported) -> str:
    """One exported memory: an unquoted heading of enum values, its text quoted, its evidence and provenance."""
    memory = item.memory
    text = f"{memory.label()}\n{memory.body(OBSERVATION_CHARS)}"
    return "\n".join([f"### Memory {index} ({memory.type}, {memory.outcome.value})", "", quoted(text), "",
                      evidence_line(item), quoted(f"Provenance: {provenance(item)}")])
