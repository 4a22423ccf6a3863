"""Edits, archives and feedback from outside a run (the MCP server's write tools): each soft, kept in the memory's
history, and reversible.

* `revise`: an edit writes the edited content as a new memory through the pool's add path (redacted, screened,
  deduplicated), with the old one's provenance and a fresh record (its evidence was about other words), and archives
  the old one as "replaced" by it. Screening that flags the edit refuses it, so a live memory is never replaced by
  one retrieval would hold back. An edit back to content the pool keeps archived restores that memory.
* `restore`: an archived memory is served again; the version of it that is live (the edit that replaced it, or a
  later edit of that one: versions are linked both ways in their changes) is archived as "reverted", so a restore
  undoes the edits since that version (and restoring a later version redoes them).
* `feedback`: a client's word that a memory helped, hurt or was ignored is one credit entry, like a run's citation
  (helped: cited in a success; hurt: cited in a failure; ignored: shown, not cited), its source "feedback". A run
  id the client names counts once however often it is given, and never overrides a verdict by tests or a judge.

Each change is a `Change` in the memory's `changes` (the pool's `archive` / `restore` write them), beside its
credit history."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from mtl_graph.core.errors import MTLError
from mtl_graph.memory.base import Change, Memory, Outcome
from mtl_graph.memory.dedup import dedup_key
from mtl_graph.memory.lifecycle.policy import LifecycleConfig
from mtl_graph.memory.usage import Use

Verdict = Literal["helped", "hurt", "ignored"]
VERDICTS: dict[str, tuple[bool, Outcome]] = {
    "helped": (True, Outcome.SUCCESS),
    "hurt": (True, Outcome.FAILURE),
    "ignored": (False, Outcome.UNKNOWN),
}
"""A feedback verdict as a credit entry: (cited, the run's outcome)."""
FEEDBACK_SOURCE = "feedback"
"""The verdict source of a feedback entry (memory/usage.py)."""
RULED = ("tests", "judge")
"""Verdict sources feedback never overrides."""


class RevisionError(MTLError, ValueError):
    """An edit, archive, restore or feedback that cannot be applied; one line saying why."""


@dataclass
class Revised:
    """What an edit did."""

    old: Memory
    """The memory edited, now archived (replaced)."""
    new: Memory
    """The memory serving in its place."""
    how: str
    """added (new content), merged (the content of a stored memory, which took the edit's provenance) or
    restored (content the pool kept archived, served again)."""


def _memory(pool: Any, memory_id: str) -> Memory:
    memory = pool.get(memory_id)
    if memory is None:
        raise RevisionError(f"no memory {_shown(memory_id)} in namespace {pool.namespace!r}")
    return memory


def revise(pool: Any, memory_id: str, edited: Memory, why: str = "", *, by: str = "") -> Revised:
    """Put `edited` (the memory with its content changed: same format and outcome) in place of the memory
    `memory_id` (see the module docstring)."""
    from mtl_graph.memory.screening.screen import screen
    from mtl_graph.redaction.redact import redact_memory

    with pool.write_lock:
        old = _memory(pool, memory_id)
        if old.archived:
            raise RevisionError(f"memory {old.id} is archived ({old.archived}): restore it before editing it")
        if edited.type != old.type or edited.outcome != old.outcome:
            raise RevisionError("an edit keeps the memory's format and outcome")
        # an edit is not a way out of quarantine (a person releases it): the reasons follow, the record starts anew
        edited = redact_memory(edited.model_copy(update={
            "id": "", "sources": old.sources, "changes": [], "quarantined": old.quarantined,
            "quarantine_released": old.quarantine_released, "quarantine_baseline": None, "archived": ""}))
        edited = type(edited).model_validate(edited.model_dump(exclude={"id"}))  # the id follows the content
        if dedup_key(edited) == dedup_key(old):
            raise RevisionError(f"the edit leaves memory {old.id}'s content as it is")
        if flags := screen(edited):
            raise RevisionError(f"screening flagged the edited memory: {'; '.join(flags)}"[:300])
        [result] = pool.add_many([edited])
        new = _memory(pool, result.merged_into or result.id)
        how = "added" if result.status == "added" else "merged"
        if new.archived:  # an edit back to archived content: that memory serves again
            new = pool.restore(new.id, by=by)
            how = "restored"
        pool.archive(old.id, f"replaced by {new.id}" + (f": {why.strip()}" if why.strip() else ""),
                     change=Change(action="replaced", why=why.strip()[:300], other=new.id, by=by))
        pool.note_change(new.id, Change(action="edit_of", why=why.strip()[:300], other=old.id, by=by))
        return Revised(_memory(pool, old.id), _memory(pool, new.id), how)


def archive(pool: Any, memory_id: str, why: str = "", *, by: str = "") -> Memory:
    """Take a memory out of retrieval, kept with its record and history (`restore` undoes it)."""
    memory = _memory(pool, memory_id)
    if memory.archived:
        raise RevisionError(f"memory {memory.id} is already archived ({memory.archived})")
    return pool.archive(memory.id, why.strip() or f"archived by {by or 'a person'}", by=by)


LINKS = ("replaced", "edit_of", "reverted")
"""Changes that tie two versions of one memory together (an edit and what it replaced)."""
MAX_VERSIONS = 1000
"""Versions of one memory followed when restoring one of them."""


def versions(pool: Any, memory: Memory) -> list[Memory]:
    """Every version of a memory, itself first: the memories its edits and reverts link it to, and theirs."""
    found, frontier = {memory.id: memory}, [memory]
    while frontier and len(found) < MAX_VERSIONS:
        for change in frontier.pop().changes:
            if change.action in LINKS and change.other and change.other not in found:
                other = pool.get(change.other)
                if other is not None and other.id not in found:
                    found[other.id] = other
                    frontier.append(other)
    return list(found.values())


def restore(pool: Any, memory_id: str, *, by: str = "") -> tuple[Memory, Memory | None]:
    """Serve an archived memory again; the live version of it (the edit that replaced it, or a later edit of
    that), if any, is archived as reverted: one version of a memory is served at a time. Returns the memory and
    the version archived (None when no other version was live)."""
    with pool.write_lock:
        memory = _memory(pool, memory_id)
        if not memory.archived:
            raise RevisionError(f"memory {memory.id} is not archived (status: {memory.status})")
        replacement = None
        for other in versions(pool, memory)[1:]:
            if not other.archived:
                replacement = pool.archive(other.id, f"reverted: {memory.id} restored in its place",
                                           change=Change(action="reverted", other=memory.id, by=by))
        return pool.restore(memory.id, by=by), replacement


def feedback(pool: Any, memory_id: str, verdict: str, run_id: str | None = None, *,
             lifecycle: LifecycleConfig | None = None) -> tuple[Memory, list[str]]:
    """Credit one memory with a client's verdict (see the module docstring); returns the memory with its record
    and the ids the evidence quarantined (with a lifecycle config)."""
    if verdict not in VERDICTS:
        raise RevisionError(f"verdict must be one of {', '.join(VERDICTS)}, not {_shown(verdict)}")
    memory = _memory(pool, memory_id)
    run = run_id if run_id else f"feedback-{uuid.uuid4().hex}"
    ruled = [h for h in pool.history(memory.id) if h["run_id"] == run and h["verdict_by"] in RULED]
    if ruled:
        raise RevisionError(f"run {_shown(run)} already has a verdict by {ruled[0]['verdict_by']} for memory "
                            f"{memory.id}: feedback does not override it")
    cited, outcome = VERDICTS[verdict]
    report = pool.credit(run, [Use(memory.id, cited)], outcome, FEEDBACK_SOURCE, lifecycle=lifecycle)
    return _memory(pool, memory.id), report.quarantined


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + f"... ({len(text)} characters)"
