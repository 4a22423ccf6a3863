"""What the MTL graph's stages share, fixed when the graph is built: `StageServices`.

One compiled graph serves many runs at once (the evaluation harness, a LangGraph server), so nothing here changes
after the build. The two things that are made later are owned by small thread-safe objects: the pool named by
MTL_POOL, opened on first use, and its per-namespace views (`PoolSource`); and each run's settings, resolved once
per run from the build's config and the run's context (`RunMemo`), not again at every node."""

from __future__ import annotations

import copy
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, TypeVar

from mtl_graph.agent.config import AgentConfig
from mtl_graph.config import MTLConfig, MTLContext, agent_config, effective
from mtl_graph.pipeline.credit import ServedRuns
from mtl_graph.pipeline.server_policy import ServerPolicy
from mtl_graph.memory.pool.pool import MemoryPool


def open_default_pool() -> MemoryPool:
    """The pool at MTL_POOL. Within one process every caller shares one handle (`MemoryPool.open` caches open
    directories), which matters in a LangGraph server: the process holds the embedded pool's lock."""
    from mtl_graph.config.environment import get_settings

    return MemoryPool.open(get_settings().pool)


def check_kinds(pool: Any, model: Any) -> None:
    """Raise TypeError unless `pool` is a MemoryPool or None (MTL_POOL's, opened at the first run) and `model` a
    chat model, a "provider:model" string or None (the run's context names it)."""
    from langchain_core.language_models import BaseLanguageModel
    from langchain_core.runnables import Runnable

    if pool is not None and not isinstance(pool, MemoryPool):
        hint = f": open it first, MemoryPool.open({pool!r})"[:120] if isinstance(pool, (str, os.PathLike)) else ""
        raise TypeError(f"pool: a MemoryPool or None (MTL_POOL's, opened at the first run), not "
                        f"{type(pool).__name__}{hint}")
    if model is not None and not isinstance(model, (str, BaseLanguageModel, Runnable)):
        raise TypeError(f"model: a chat model, a 'provider:model' string or None (the run's context names it), "
                        f"not {type(model).__name__}")


V = TypeVar("V")


class Sealed:
    """An owner whose attributes are set once, in `__init__`: assigning one afterwards raises."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} cannot be changed ({name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} cannot be changed ({name!r})")


class PoolSource(Sealed):
    """The graph's memory pool: the one it was built with, else MTL_POOL's, opened on first use (once, however
    many runs start together), and its view per namespace, made once each."""

    __slots__ = ("_pool", "_open", "_views", "_lock")

    def __init__(self, pool: MemoryPool | None = None, open_pool: Callable[[], MemoryPool] = open_default_pool):
        object.__setattr__(self, "_pool", pool)
        object.__setattr__(self, "_open", open_pool)
        object.__setattr__(self, "_views", {})
        object.__setattr__(self, "_lock", threading.Lock())

    @property
    def opened(self) -> MemoryPool | None:
        """The pool if it is open (given, or opened by a run), without opening it."""
        return self._pool

    def get(self, namespace: str | None = None) -> MemoryPool:
        """The pool, or its view of `namespace` (None or the pool's own: the pool itself)."""
        pool = self._pool
        if pool is None:
            with self._lock:  # two runs starting together must not open the directory twice (it is locked)
                if self._pool is None:
                    object.__setattr__(self, "_pool", self._open())
                pool = self._pool
        if namespace is None or namespace == pool.namespace:
            return pool
        with self._lock:
            if namespace not in self._views:
                self._views[namespace] = pool.in_namespace(namespace)
            return self._views[namespace]


def _given(context: Any) -> tuple[Any, ...]:
    """What the run's settings are made of: our fields' values in `context` (an MTLContext, a host's dict, an
    object with attributes)."""
    if isinstance(context, dict):
        return tuple(context.get(name) for name in MTLContext.model_fields)
    return tuple(getattr(context, name, None) for name in MTLContext.model_fields)


class RunMemo(Sealed, Generic[V]):
    """Values derived from an object, keyed by the object's identity (a dict context is not hashable).

    Each entry holds its object, so its id cannot be reused by another while the entry lives. Bounded (the
    least recently used entry goes first: a run still going past that many others is merely resolved again) and
    thread-safe: runs of one graph go on in several threads at once. With `fingerprint`, an entry whose object
    was changed in place since (a context reused across runs and edited between them) is made again."""

    __slots__ = ("_entries", "_lock", "_limit", "_fingerprint")

    def __init__(self, limit: int = 256, fingerprint: Callable[[Any], Any] | None = None) -> None:
        object.__setattr__(self, "_entries", OrderedDict())
        object.__setattr__(self, "_lock", threading.Lock())
        object.__setattr__(self, "_limit", limit)
        object.__setattr__(self, "_fingerprint", fingerprint)

    def get(self, key: Any, make: Callable[[Any], V]) -> V:
        """The value for `key`, made by `make(key)` when there is none (an exception is raised, not kept)."""
        seen = self._fingerprint(key) if self._fingerprint is not None else None
        with self._lock:
            entry = self._entries.get(id(key))
            if entry is not None and entry[0] is key and entry[1] == seen:
                self._entries.move_to_end(id(key))
                return entry[2]
        value = make(key)  # outside the lock: settings are validated, an agent config copied
        with self._lock:
            entry = self._entries.get(id(key))
            if entry is not None and entry[0] is key and entry[1] == seen:
                return entry[2]  # another thread made it first: every caller gets the one object
            self._entries[id(key)] = (key, copy.deepcopy(seen), value)
            self._entries.move_to_end(id(key))
            while len(self._entries) > self._limit:
                self._entries.popitem(last=False)
        return value

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


@dataclass(frozen=True)
class StageServices:
    """What the stages share, fixed at build time (assigning a field raises `FrozenInstanceError`)."""

    pools: PoolSource
    """The memory pool (MTL_POOL's, opened on first use, when the graph was built without one) and its views."""
    model: Any
    """The build's chat model (a model object, a "provider:name" string) or None: each run's context names one."""
    agent: Any
    """The agent (a DefaultAgent, anything with `Agent.run`) or None for a host that runs its own agent."""
    judge: Any
    """A judge used instead of the LLM judge for tasks without a check; None: the LLM judge."""
    distiller: Any
    """Turns a trajectory into memories: `distiller(trajectory, formats, model)`."""
    config: MTLConfig
    """The build's settings; a run's context applies over them."""
    policy: ServerPolicy | None = None
    """A served graph's policy (tasks, workspaces, models, namespaces a client may name); None when not served."""
    served: ServedRuns | None = None
    """A served graph's own record of each run's retrieval and verdict: what its credit comes from."""
    _settings: RunMemo[MTLConfig] = field(default_factory=lambda: RunMemo(fingerprint=_given), init=False,
                                          repr=False, compare=False)
    _agent_settings: RunMemo[AgentConfig] = field(default_factory=RunMemo, init=False, repr=False, compare=False)
    _agents: RunMemo[Any] = field(default_factory=lambda: RunMemo(limit=32), init=False, repr=False, compare=False)

    @classmethod
    def of(cls, pool: MemoryPool | None, model: Any, agent: Any, judge: Any, distiller: Any, config: MTLConfig,
           policy: ServerPolicy | None = None) -> StageServices:
        """The services of one graph; a served graph (one with a policy) keeps its own ledger of runs. Every graph
        factory comes here, so a pool or model of the wrong kind is a one-line TypeError before anything is built."""
        check_kinds(pool, model)
        return cls(PoolSource(pool), model, agent, judge, distiller, config, policy,
                   ServedRuns() if policy is not None else None)

    def settings(self, context: Any) -> MTLConfig:
        """The run's settings: the build's with the run's context applied, resolved once per context object (a
        resumed run brings a new one and is resolved again). No context: the build's config itself."""
        if context is None:
            return self.config
        return self._settings.get(context, lambda ctx: effective(self.config, ctx))

    def _own(self) -> Any:
        return getattr(self.agent, "config", None)

    def agent_settings(self, cfg: MTLConfig) -> AgentConfig:
        """The agent's settings under `cfg` (the agent's own, when it has an AgentConfig, with the run's knobs)."""
        own = self._own()
        return self._agent_settings.get(cfg, lambda c: agent_config(c, own if isinstance(own, AgentConfig) else None))

    def agent_for(self, cfg: MTLConfig) -> Any:
        """The agent with `cfg`'s agent settings (a DefaultAgent is rebuilt only when they differ from its own)."""
        own = self._own()
        if own is None:
            return self.agent

        def make(c: MTLConfig) -> Any:
            config = agent_config(c, own)
            return self.agent if config == own else type(self.agent)(config)

        return self._agents.get(cfg, make)
