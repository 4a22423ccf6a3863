"""Write back's learning step: what the run used, what it distilled that is new, and the credit it gives.

The memories shown are the run's retrievals in prompt order (Memory 1 is the first); the ones it cited are read
from the agent's own words (pipeline/citations.py). A distilled memory that is a near copy of one the run was
shown is not added: the run credits that memory as used instead (junk feeding on itself). The new memories name
the memories the run cited as their origin (`Provenance.cited`): if one of those is quarantined, they follow it.
The caller credits nothing for a run that ended in `error` or whose verdict is suspect.
"""

from __future__ import annotations

from typing import Any

from mtl_graph.pipeline.citations import cited_ids
from mtl_graph.core.trajectory import Trajectory, Verdict
from mtl_graph.pipeline import events
from mtl_graph.config import MTLConfig, lifecycle_of
from mtl_graph.pipeline.state import RunState
from mtl_graph.memory.dedup import of_run
from mtl_graph.memory.lifecycle.supersede import SupersedeConfig, check_conflict, supersedable
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.memory.usage import Use


def shown_ids(state: RunState) -> list[str]:
    """The run's memories in the order the prompt numbered them (retrieval, then a mid-run refresh or the agent's
    own searches, which never happen in one run)."""
    from mtl_graph.pipeline.memory_tool import searched_ids

    retrieved = [r["id"] for r in [*state.retrieved, *state.re_retrieved]]
    return list(dict.fromkeys([*retrieved, *searched_ids(state.trajectory)]))


def write_run(pool: MemoryPool, state: RunState, cfg: MTLConfig, verdict: Verdict | None,
              served: "ServedRuns | None" = None, model: Any = None) -> dict[str, Any]:
    """Add the run's new memories and credit the memories it was shown; the update for the run's state.

    With `served` (a graph with a server policy) the credit comes from what the graph's nodes recorded, never
    from the thread's state. `model` decides supersessions (None: the deterministic rule)."""
    trajectory = state.trajectory
    if served is not None:
        record = served.take(state.run_id) or {}
        shown, cited, verdict = record.get("shown", []), record.get("cited", []), record.get("verdict")
    else:
        shown = shown_ids(state)
        cited = cited_ids(trajectory, shown)
    memories = of_run(state.distilled, state.run_id)
    if cited:
        memories = [m.model_copy(update={"sources": [s.model_copy(update={"cited": cited}) for s in m.sources]})
                    for m in memories]
    settings = cfg.retrieval.lifecycle_settings
    supersede = SupersedeConfig(similarity=settings.near_copy, model=model)
    copies = pool.near_copies(memories, shown, settings.near_copy) if cfg.retrieval.lifecycle == "on" else {}
    # a near copy whose advice contradicts the memory shown is what the run learnt, not a copy: it is added and
    # supersedes that memory (at the same near-copy threshold)
    copies = {i: source for i, source in copies.items() if not contradicts(pool, memories[i], source, supersede)}
    re_extracted = {memories[i].id: source for i, source in copies.items()}
    cited = list(dict.fromkeys([*cited, *copies.values()]))
    results = pool.add_many([m for i, m in enumerate(memories) if i not in copies], supersede=supersede)
    events.written(results)
    update: dict[str, Any] = {"new_memory_ids": [r.merged_into or r.id for r in results],
                              "memories_written": results.summary()}
    credit: dict[str, Any] = {"shown": shown, "cited": cited, "re_extracted": re_extracted, "credited": False}
    if re_extracted:
        events.emit("re_extracted", memories=re_extracted)
    if verdict is not None and not verdict.is_error and not verdict.is_suspect and shown:
        report = pool.credit(state.run_id or "run", [Use(i, i in cited) for i in shown],
                             verdict.outcome, verdict.source, lifecycle=lifecycle_of(cfg))
        credit.update(credited=True, outcome=verdict.outcome.value, verdict_by=verdict.source,
                      quarantined=report.quarantined, missing=report.missing)
        events.emit("credited", ids=list(report.credited), cited=cited, outcome=verdict.outcome.value,
                    verdict_by=verdict.source, quarantined=report.quarantined)
    update["credit"] = credit
    return update


def contradicts(pool: MemoryPool, memory: Any, shown_id: str, config: SupersedeConfig) -> bool:
    """Whether a distilled memory's advice conflicts with the shown memory it nearly copies (it would supersede it)."""
    shown = pool.get(shown_id)
    return shown is not None and shown.outcome == memory.outcome and supersedable(shown) and \
        check_conflict(memory, shown, config) is not None


class ServedRuns:
    """What a served graph's own nodes decided for each run, kept out of the thread's state.

    A server's client may update a thread's state between nodes (at an interrupt, or by re-running a node):
    a forged `retrieved`, trajectory or verdict would credit or debit memories it names, and enough forged
    failures would quarantine good memories for every client. So a graph with a server policy credits only what
    its retrieve node chose, the citations its judge node read and the verdict it gave, by run id, once; a run
    this process did not retrieve and judge (a client-made run id, a server restarted mid-run) credits nothing.
    A mid-run refresh's memories are not credited there."""

    LIMIT = 10_000
    """Runs remembered (the oldest are forgotten first: an abandoned thread never credits)."""

    def __init__(self) -> None:
        import threading
        from collections import OrderedDict

        self._runs: "OrderedDict[str, dict[str, Any]]" = OrderedDict()
        self._lock = threading.Lock()

    def retrieved(self, run_id: str | None, ids: list[str]) -> None:
        if not run_id:
            return
        with self._lock:
            self._runs[run_id] = {"shown": list(ids)}
            self._runs.move_to_end(run_id)
            while len(self._runs) > self.LIMIT:
                self._runs.popitem(last=False)

    def searched(self, run_id: str | None, ids: list[str]) -> None:
        """The memories one of the run's searches showed the agent (after those retrieved, in order)."""
        if not run_id:
            return
        with self._lock:
            run = self._runs.setdefault(run_id, {"shown": []})
            run["shown"] = list(dict.fromkeys([*run["shown"], *ids]))

    def judged(self, run_id: str | None, trajectory: Trajectory | None, verdict: Verdict) -> None:
        with self._lock:
            run = self._runs.get(run_id or "")
            if run is not None:
                run.update(cited=cited_ids(trajectory, run["shown"]), verdict=verdict)

    def take(self, run_id: str | None) -> dict[str, Any] | None:
        """The run's record, once (a write back run again credits nothing more)."""
        with self._lock:
            return self._runs.pop(run_id or "", None)
