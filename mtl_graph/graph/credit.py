"""Write back's learning step: what the run used, what it distilled that is new, and the credit it gives.

The memories shown are the run's retrievals in prompt order (Memory 1 is the first); the ones it cited are read
from the agent's own words (experience/citations.py). A distilled memory that is a near copy of one the run was
shown is not added: the run credits that memory as used instead (junk feeding on itself). The new memories name
the memories the run cited as their origin (`Provenance.cited`): if one of those is quarantined, they follow it.
The caller credits nothing for a run that ended in `error` or whose verdict is suspect.
"""

from __future__ import annotations

from typing import Any

from mtl_graph.experience.citations import cited_ids
from mtl_graph.experience.trajectory import Trajectory, Verdict
from mtl_graph.graph import events
from mtl_graph.graph.context import MTLConfig, lifecycle_of
from mtl_graph.memory.dedup import of_run
from mtl_graph.memory.pool import MemoryPool
from mtl_graph.memory.record import Use


def shown_ids(state: dict[str, Any]) -> list[str]:
    """The run's memories in the order the prompt numbered them (retrieval, then a mid-run refresh)."""
    return list(dict.fromkeys(r["id"] for r in [*state.get("retrieved", []), *state.get("re_retrieved", [])]))


def write_run(pool: MemoryPool, state: dict[str, Any], cfg: MTLConfig, verdict: Verdict | None) -> dict[str, Any]:
    """Add the run's new memories and credit the memories it was shown; the update for the run's state."""
    shown = shown_ids(state)
    trajectory = Trajectory.model_validate(state["trajectory"]) if state.get("trajectory") else None
    cited = cited_ids(trajectory, shown)
    memories = of_run(state.get("distilled") or [], state.get("run_id"))
    if cited:
        memories = [m.model_copy(update={"sources": [s.model_copy(update={"cited": cited}) for s in m.sources]})
                    for m in memories]
    settings = cfg.lifecycle_settings
    copies = pool.near_copies(memories, shown, settings.near_copy) if cfg.lifecycle == "on" else {}
    re_extracted = {memories[i].id: source for i, source in copies.items()}
    cited = list(dict.fromkeys([*cited, *copies.values()]))
    results = pool.add_many([m for i, m in enumerate(memories) if i not in copies])
    events.written(results)
    update: dict[str, Any] = {"new_memory_ids": [r.merged_into or r.id for r in results],
                              "memories_written": results.summary()}
    credit: dict[str, Any] = {"shown": shown, "cited": cited, "re_extracted": re_extracted, "credited": False}
    if re_extracted:
        events.emit("re_extracted", memories=re_extracted)
    if verdict is not None and not verdict.is_error and not verdict.is_suspect and shown:
        report = pool.credit(state.get("run_id") or "run", [Use(i, i in cited) for i in shown],
                             verdict.outcome, verdict.source, lifecycle=lifecycle_of(cfg))
        credit.update(credited=True, outcome=verdict.outcome.value, verdict_by=verdict.source,
                      quarantined=report.quarantined, missing=report.missing)
        events.emit("credited", ids=list(report.credited), cited=cited, outcome=verdict.outcome.value,
                    verdict_by=verdict.source, quarantined=report.quarantined)
    update["credit"] = credit
    return update
