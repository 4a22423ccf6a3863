"""What the MCP server offers, independent of the protocol: its tools (each a JSON schema and a function of the raw
arguments) and its resources, over one pool and the namespaces it was given.

Every argument is untrusted client input, checked here rather than by the SDK's schema validation (which quotes
the whole offending value back, a 1 MB string included): a bad one is a `ToolInputError` of one line that quotes
at most 80 characters, and the host turns it into a tool error. Nothing here re-implements the pool: a search is
the memory tool's `RunSearch` (the run filter, the lifecycle's floor and quarantine, the results fenced as data),
a write is the pool's add path (redacted, screened, deduplicated), feedback is a credit entry and an edit or an
archive is the lifecycle's (memory/lifecycle/revisions.py)."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urlparse

from pydantic import ValidationError

from mtl_graph.config import MTLConfig, lifecycle_of
from mtl_graph.core.errors import MTLError
from mtl_graph.core.task import Task
from mtl_graph.core.templates import render_template
from mtl_graph.memory.base import NOT_CONTENT, Memory, Provenance, first_validation_error, parse_memory
from mtl_graph.memory.engine.namespace import NamespaceError, check_namespace
from mtl_graph.memory.fence import fence_memories
from mtl_graph.memory.lifecycle import revisions
from mtl_graph.memory.lifecycle.policy import LifecycleConfig, utility
from mtl_graph.pipeline.memory_tool import MAX_K, MAX_QUERY, RunSearch

BY = "mcp"
"""Who a change made through the server is recorded as."""
MAX_ID = 100
"""Characters of a memory id (a UUID is 36)."""
MAX_REASON = 300
"""Characters of a reason or a run id."""
MAX_MEMORY_JSON = 60_000
"""Characters of a memory given to add_memory or of an edit's changes, as JSON (the largest format's text fits)."""
TOP_MEMORIES = 10
"""Memories a namespace's top resource lists."""
RESOURCE_SCHEME = "mtl"
SEARCH_TASK_ID = "mcp-client"
"""The task id a client's search runs under (no memory is made from it: the same-task guard excludes nothing)."""


class ToolInputError(MTLError, ValueError):
    """A tool call or resource read that cannot be served; its one line is what the client reads."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + f"... ({len(text)} characters)"


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit] + "..."


@dataclass(frozen=True)
class ToolSpec:
    """One tool: what the client sees and the method that serves it."""

    name: str
    description: str
    properties: dict[str, Any]
    required: tuple[str, ...] = ()
    writes: bool = False
    """Changes the pool (not offered, nor served, by a read-only server)."""

    def input_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": self.properties, "required": list(self.required),
                "additionalProperties": False}


def _text(args: dict[str, Any], name: str, limit: int, *, required: bool = False) -> str | None:
    value = args.get(name)
    if value is None or (isinstance(value, str) and not value.strip() and not required):
        if required:
            raise ToolInputError(f"{name} is required")
        return None
    if not isinstance(value, str):
        raise ToolInputError(f"{name} must be a string, not {type(value).__name__} {_shown(value)}")
    if len(value) > limit:
        raise ToolInputError(f"{name} is {len(value)} characters; at most {limit}")
    if required and not value.strip():
        raise ToolInputError(f"{name} is empty")
    return value.strip()


def _integer(args: dict[str, Any], name: str, low: int, high: int, default: int) -> int:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ToolInputError(f"{name} must be a whole number from {low} to {high}, not {_shown(value)}")
    return value


def _names(args: dict[str, Any], name: str) -> list[str]:
    value = args.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and 0 < len(v) <= 100 for v in value) \
            or len(value) > 50:
        raise ToolInputError(f"{name} must be a list of at most 50 names, not {_shown(value)}")
    return value


def _object(args: dict[str, Any], name: str) -> dict[str, Any]:
    value = args.get(name)
    if not isinstance(value, dict):
        raise ToolInputError(f"{name} must be an object, not {type(value).__name__} {_shown(value)}")
    size = len(json.dumps(value, ensure_ascii=False, default=str))
    if size > MAX_MEMORY_JSON:
        raise ToolInputError(f"{name} is {size} characters as JSON; at most {MAX_MEMORY_JSON}")
    return value


@dataclass
class MemoryTools:
    """The server's tools and resources over `pool` (opened in the first of `namespaces`), under the run settings
    `cfg`; `read_only` leaves out every tool that writes."""

    pool: Any
    cfg: MTLConfig
    namespaces: tuple[str, ...]
    """The namespaces clients may name (the allow-list); the first is the one a call without one uses."""
    read_only: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if not self.namespaces:
            raise ValueError("the server needs at least one namespace")
        self.namespaces = tuple(dict.fromkeys(check_namespace(n) for n in self.namespaces))
        self._views = {n: self.pool.in_namespace(n) for n in self.namespaces}
        self._specs = {spec.name: spec for spec in self._all_specs()}

    # ------------------------------------------------------------------ what a client sees
    def specs(self) -> list[ToolSpec]:
        """The tools offered: all of them, or only those that read with `read_only`."""
        return [s for s in self._specs.values() if not (self.read_only and s.writes)]

    def _all_specs(self) -> list[ToolSpec]:
        from mtl_graph.memory.formats import names as format_names

        ns = {"type": "string", "enum": list(self.namespaces),
              "description": f"The pool namespace (default: {self.namespaces[0]})."}
        mid = {"type": "string", "maxLength": MAX_ID, "description": "A memory id (from search_memories)."}
        return [
            ToolSpec("search_memories", _doc("search"), {
                "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY,
                          "description": "What to look for: the problem, an error message, or an approach."},
                "k": {"type": "integer", "minimum": 1, "maximum": MAX_K,
                      "description": f"How many memories (default {self._top_k()}, at most {MAX_K})."},
                "format": {"type": "string", "enum": format_names(),
                           "description": "Only memories of this format (default: every format)."},
                "domain": {"type": "string", "maxLength": 100,
                           "description": "Only memories from this domain (a benchmark, a repository)."},
                "exclude_domains": {"type": "array", "items": {"type": "string"}, "maxItems": 50,
                                    "description": "Leave out memories from these domains."},
                "namespace": ns}, ("query",)),
            ToolSpec("get_memory", _doc("get"), {"id": mid, "namespace": ns}, ("id",)),
            ToolSpec("add_memory", _doc("add"), {
                "memory": {"type": "object", "description": "The memory's fields in one format, with its "
                           f"`type` ({', '.join(format_names())}); e.g. an insight: type, title, description, "
                           "content.", "properties": {"type": {"type": "string", "enum": format_names()}},
                           "required": ["type"]},
                "domain": {"type": "string", "maxLength": 100,
                           "description": "Where it comes from (a repository, a benchmark): its provenance."},
                "namespace": ns}, ("memory",), writes=True),
            ToolSpec("feedback", _doc("feedback"), {
                "id": mid, "verdict": {"type": "string", "enum": list(revisions.VERDICTS),
                                       "description": "helped, hurt or ignored (shown but not used)."},
                "run_id": {"type": "string", "maxLength": MAX_REASON,
                           "description": "Your run or session id: feedback for one run counts once."},
                "namespace": ns}, ("id", "verdict"), writes=True),
            ToolSpec("update_memory", _doc("update"), {
                "id": mid, "changes": {"type": "object", "description": "The content fields to change, e.g. "
                                                                          '{"content": "..."}.'},
                "why": {"type": "string", "maxLength": MAX_REASON}, "namespace": ns}, ("id", "changes"),
                writes=True),
            ToolSpec("archive_memory", _doc("archive"), {
                "id": mid, "why": {"type": "string", "maxLength": MAX_REASON}, "namespace": ns}, ("id",),
                writes=True),
            ToolSpec("restore_memory", _doc("restore"), {"id": mid, "namespace": ns}, ("id",), writes=True),
        ]

    def _top_k(self) -> int:
        return max(1, min(MAX_K, self.cfg.retrieval.top_k or 3))

    # ------------------------------------------------------------------ calls
    def call(self, name: Any, arguments: Any) -> tuple[str, dict[str, Any]]:
        """Serve one tool call: the text the client reads and the structured result; a ToolInputError (one line)
        for anything that cannot be served."""
        spec = self._specs.get(name) if isinstance(name, str) else None
        if spec is None:
            raise ToolInputError(f"no tool {_shown(name)}; tools: {', '.join(s.name for s in self.specs())}")
        if spec.writes and self.read_only:
            raise ToolInputError(f"{spec.name} is not offered: this server is read-only")
        args = arguments if arguments is not None else {}
        if not isinstance(args, dict):
            raise ToolInputError(f"the arguments must be an object, not {type(args).__name__}")
        if unknown := sorted(set(args) - set(spec.properties), key=str):
            raise ToolInputError(f"{spec.name} takes no argument {_shown(unknown[0])} "
                                 f"(it takes {', '.join(spec.properties)})")
        missing = [r for r in spec.required if args.get(r) is None]
        if missing:
            raise ToolInputError(f"{spec.name} needs {missing[0]}")
        serve: Callable[[Any, dict[str, Any]], tuple[str, dict[str, Any]]] = getattr(self, f"_{spec.name}")
        pool = self._namespace(args.get("namespace"))
        with self._lock:  # one call at a time on the pool: an embedded engine is one process's, file locks and all
            try:
                return serve(pool, args)
            except (revisions.RevisionError, NamespaceError) as exc:
                raise ToolInputError(_one_line(str(exc))) from None

    def _namespace(self, value: Any) -> Any:
        if value is None:
            return self._views[self.namespaces[0]]
        if not isinstance(value, str) or value not in self._views:
            raise ToolInputError(f"namespace {_shown(value)} is not served here (served: "
                                 f"{', '.join(self.namespaces)})")
        return self._views[value]

    def _memory(self, pool: Any, args: dict[str, Any]) -> Memory:
        memory_id = _text(args, "id", MAX_ID, required=True)
        memory = pool.get(memory_id)
        if memory is None:
            raise ToolInputError(f"no memory {_shown(memory_id)} in namespace {pool.namespace!r}")
        return memory

    def _search_memories(self, pool: Any, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        from mtl_graph.memory.formats import find

        query = _text(args, "query", MAX_QUERY, required=True)
        k = _integer(args, "k", 1, MAX_K, self._top_k())
        fmt = _text(args, "format", 100)
        if fmt is not None and find(fmt) is None:
            raise ToolInputError(f"unknown format {_shown(fmt)}")
        domain = _text(args, "domain", 100)
        exclude = _names(args, "exclude_domains")
        retrieval = self.cfg.retrieval
        retrieval = retrieval.model_copy(update={
            "memory_type": fmt or retrieval.memory_type, "search_budget": 1,
            "exclude_domains": [*retrieval.exclude_domains, *exclude],
            # a client names the domain it wants, or none: there is no task of its own to hold out
            "same_domain": domain is not None, "hold_one_out": False if domain is not None else retrieval.hold_one_out})
        cfg = self.cfg.model_copy(update={"retrieval": retrieval})
        task = Task(id=SEARCH_TASK_ID, instruction=query, domain=domain or "mcp")
        search = RunSearch(pool, cfg, task, shown=[], searches=0, every_format=fmt is None, in_run=False)
        text, step = search(query, k)
        found = step.args.get("found", [])
        if not found and text.startswith("The memory search failed"):
            raise ToolInputError(text)
        numbered = [{"number": n, "id": i} for n, i in enumerate(found, 1)]
        if found:
            text += "\n\n" + "\n".join(f"Memory {m['number']}: id {m['id']}" for m in numbered)
        return text, {"namespace": pool.namespace, "query": query, "found": numbered}

    def _get_memory(self, pool: Any, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        memory = self._memory(pool, args)
        fenced = fence_memories([memory], observation_chars=self.cfg.retrieval.observation_chars)
        rate = pool.base_rate().rate
        info = {"id": memory.id, "namespace": pool.namespace, "type": memory.type, "status": memory.status,
                "outcome": memory.outcome.value, "domains": memory.domains,
                "content": memory.content_fields(), "record": memory.stats.model_dump(mode="json"),
                "utility": round(utility(memory.stats, rate, self._lifecycle()), 4),
                "flagged": memory.flagged, "quarantined": memory.quarantined, "archived": memory.archived,
                "history": pool.history(memory.id), "changes": [c.model_dump(mode="json") for c in memory.changes]}
        text = render_template("mtl_graph.mcp", "memory", boundary=fenced.boundary, memories=fenced.text,
                               id=memory.id, status=memory.status)
        return text, info

    def _add_memory(self, pool: Any, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        given = _object(args, "memory")
        if blocked := sorted(set(given) & NOT_CONTENT, key=str):
            raise ToolInputError(f"a new memory cannot set {', '.join(blocked)} (only its format's fields, type "
                                 "and outcome)")
        domain = _text(args, "domain", 100)
        try:
            memory = parse_memory({**given, "sources": [Provenance(domain=domain).model_dump(mode="json")]})
        except ValidationError as exc:
            raise ToolInputError(f"not a valid memory: {first_validation_error(exc)}") from None
        except ValueError as exc:
            raise ToolInputError(f"not a valid memory: {_one_line(str(exc))}") from None
        result = pool.add(memory)
        stored = result.merged_into or result.id
        said = {"added": f"added memory {stored}", "merged": f"merged into memory {stored} (the same content)",
                "identical": f"memory {stored} already holds it"}[result.status]
        if result.flagged:
            said += f"; screening holds it back from retrieval: {'; '.join(result.flagged)}"
        return _one_line(said, 600), {"id": stored, "status": result.status, "namespace": pool.namespace,
                                      "flagged": result.flagged}

    def _feedback(self, pool: Any, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        memory = self._memory(pool, args)
        verdict = _text(args, "verdict", 20, required=True)
        if verdict not in revisions.VERDICTS:
            raise ToolInputError(f"verdict must be one of {', '.join(revisions.VERDICTS)}, not {_shown(verdict)}")
        run_id = _text(args, "run_id", MAX_REASON)
        credited, quarantined = revisions.feedback(pool, memory.id, verdict, run_id, lifecycle=lifecycle_of(self.cfg))
        s = credited.stats
        text = (f"recorded: memory {credited.id} {verdict}; its record: shown in {s.retrieved} runs, cited in "
                f"{s.cited} ({s.cited_success} succeeded, {s.cited_failure} failed)")
        if quarantined:
            text += f"; quarantined now: {', '.join(quarantined)}"
        return text, {"id": credited.id, "verdict": verdict, "record": s.model_dump(mode="json"),
                      "quarantined": quarantined, "status": credited.status}

    def _update_memory(self, pool: Any, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        from mtl_graph.pipeline.review import ReviewError, edited

        memory = self._memory(pool, args)
        changes = _object(args, "changes")
        if not changes:
            raise ToolInputError("changes is empty: name the content fields to change")
        why = _text(args, "why", MAX_REASON) or ""
        try:
            new = parse_memory(edited(memory.model_dump(mode="json"), changes))
        except ReviewError as exc:
            raise ToolInputError(_one_line(str(exc))) from None
        done = revisions.revise(pool, memory.id, new, why, by=BY)
        text = (f"memory {done.old.id} is archived, replaced by {done.new.id} ({done.how}); restore_memory "
                f"{done.old.id} undoes the edit")
        return text, {"old": done.old.id, "new": done.new.id, "how": done.how, "status": done.new.status}

    def _archive_memory(self, pool: Any, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        memory = self._memory(pool, args)
        why = _text(args, "why", MAX_REASON) or ""
        done = revisions.archive(pool, memory.id, why, by=BY)
        return (f"memory {done.id} is archived ({done.archived}); restore_memory {done.id} serves it again",
                {"id": done.id, "status": done.status, "archived": done.archived})

    def _restore_memory(self, pool: Any, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        memory = self._memory(pool, args)
        done, replaced = revisions.restore(pool, memory.id, by=BY)
        text = f"memory {done.id} is served again" + (
            f"; {replaced.id}, which had replaced it, is archived" if replaced is not None else "")
        return text, {"id": done.id, "status": done.status, "reverted": replaced.id if replaced else None}

    def _lifecycle(self) -> LifecycleConfig:
        return lifecycle_of(self.cfg) or LifecycleConfig()

    # ------------------------------------------------------------------ resources
    def resource_uri(self, namespace: str) -> str:
        return f"{RESOURCE_SCHEME}://pool/{namespace}/top"

    def read_resource(self, uri: Any) -> str:
        """The top memories of a served namespace (`mtl://pool/<namespace>/top`), fenced as data: the active
        memories with the best utility against the pool's base rate, then the most cited successes."""
        parsed = urlparse(str(uri))
        parts = parsed.path.strip("/").split("/")
        if parsed.scheme != RESOURCE_SCHEME or parsed.netloc != "pool" or len(parts) != 2 or parts[1] != "top":
            raise ToolInputError(f"no resource {_shown(str(uri))}; resources: "
                                 f"{', '.join(self.resource_uri(n) for n in self.namespaces)}")
        pool = self._namespace(parts[0])
        with self._lock:
            rate, cfg = pool.base_rate().rate, self._lifecycle()
            live = [m for m in pool if m.status == "active"]
            top = sorted(live, key=lambda m: (-utility(m.stats, rate, cfg), -m.stats.cited_success, m.id))
            top = top[:TOP_MEMORIES]
        if not top:
            return render_template("mtl_graph.mcp", "top_empty", namespace=pool.namespace)
        fenced = fence_memories(top, observation_chars=self.cfg.retrieval.observation_chars)
        ids = "\n".join(f"Memory {n}: id {m.id}, utility {utility(m.stats, rate, cfg):.2f}, cited in "
                        f"{m.stats.cited} runs" for n, m in enumerate(top, 1))
        return render_template("mtl_graph.mcp", "top", namespace=pool.namespace, count=len(top),
                               boundary=fenced.boundary, memories=fenced.text, ids=ids)


def _doc(name: str) -> str:
    return render_template("mtl_graph.mcp", f"tool_{name}")
