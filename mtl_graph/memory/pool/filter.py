"""Which memories a search may return: one typed value, checked once when it is made, carried from the pool's
`search` / `retrieve` through the ranked search and the lifecycle's floor to the engine's `Conditions`."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Iterable

from mtl_graph.memory.base import MemoryType, Outcome, memory_type_of
from mtl_graph.memory.engine.storage import Conditions


@dataclass(frozen=True)
class SearchFilter:
    """Which memories a search may return; the default: every format, any active memory that screening passed."""

    type: str | None = None
    """Only memories of this format (a registered format name, e.g. "insight"); None: every format."""
    outcome: str | None = None
    """Only memories distilled from runs with this outcome ("success", "failure", "unknown"); None: any."""
    domain: str | None = None
    """Only memories with a source in this domain (same-domain retrieval); None: every domain."""
    exclude_domains: tuple[str, ...] = ()
    """Leave out every memory with a source in one of these domains (hold-one-out)."""
    exclude_task_ids: tuple[str, ...] = ()
    """Leave out every memory made from one of these tasks (the same-task contamination guard)."""
    only_ids: tuple[str, ...] | None = None
    """Search only these memory ids (a subset of the pool, e.g. a seeded fraction); None: the whole pool."""
    include_flagged: bool = False
    """Also return memories that write-time screening flagged."""
    include_quarantined: bool = True
    """Also return memories the lifecycle quarantined (retrieval with the lifecycle on never does)."""
    include_superseded: bool = True
    """Also return memories a newer, contradicting memory superseded (retrieval with the lifecycle on never does)."""
    statuses_complete: bool = False
    """Every point of the pool carries a known status (its maintained statistics say so): a filter that serves only
    active memories is then one equality, which Qdrant Edge answers from its index (a 6k pool: 2 ms for a dense
    query of 20, where excluding the three other statuses took 16 ms). Points written before statuses existed
    have none, and only the exclusion serves them."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: each field is normalised once, here
        if self.type is not None and not isinstance(self.type, str):
            raise TypeError(f"search filter: type must be a format name, not {_shown(self.type)}")
        set_(self, "type", memory_type_of(self.type).value if self.type else None)
        if self.outcome is not None and not isinstance(self.outcome, str):
            raise TypeError(f"search filter: outcome must be one of {_outcomes()}, not {_shown(self.outcome)}")
        if self.outcome and self.outcome not in {o.value for o in Outcome}:
            raise ValueError(f"search filter: outcome must be one of {_outcomes()}, not {self.outcome!r}")
        set_(self, "outcome", Outcome(self.outcome).value if self.outcome else None)
        if self.domain is not None and not isinstance(self.domain, str):
            raise TypeError(f"search filter: domain must be a domain name, not {_shown(self.domain)}")
        set_(self, "domain", self.domain or None)
        set_(self, "exclude_domains", _names("exclude_domains", self.exclude_domains))
        set_(self, "exclude_task_ids", _names("exclude_task_ids", self.exclude_task_ids))
        if self.only_ids is not None:
            set_(self, "only_ids", _names("only_ids", self.only_ids))
        for name in ("include_flagged", "include_quarantined", "include_superseded", "statuses_complete"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"search filter: {name} must be True or False, not {_shown(getattr(self, name))}")

    def conditions(self) -> Conditions:
        """The filter in the engine's terms: archived memories are never returned, flagged ones unless
        `include_flagged` (points written before screening existed still match), quarantined ones unless
        `include_quarantined`, superseded ones unless `include_superseded`."""
        equals = {name: value for name, value in
                  (("type", self.type), ("outcome", self.outcome), ("domains", self.domain)) if value}
        excludes = {"domains": list(self.exclude_domains), "source_task_ids": list(self.exclude_task_ids)}
        if not self.include_flagged:
            excludes["flagged"] = ["true"]
        excludes["status"] = ["archived", *([] if self.include_quarantined else ["quarantined"]),
                              *([] if self.include_superseded else ["superseded"])]
        if self.statuses_complete and len(excludes["status"]) == len(STATUSES) - 1:
            equals["status"] = "active"  # the same points as excluding every other status: see statuses_complete
            del excludes["status"]
        return Conditions(equals=equals, excludes=excludes,
                          only_ids=list(self.only_ids) if self.only_ids is not None else None)

    def without_quarantined(self) -> "SearchFilter":
        """The same filter, quarantined memories left out (what retrieval with the lifecycle on searches)."""
        return self if not self.include_quarantined else replace(self, include_quarantined=False)

    def served(self) -> "SearchFilter":
        """The same filter, quarantined and superseded memories left out (what retrieval with the lifecycle on
        searches)."""
        return replace(self.without_quarantined(), include_superseded=False)

    @classmethod
    def of(cls, where: "SearchFilter | None", type: MemoryType | str | None = None, **given: Any) -> "SearchFilter":
        """`where`, or a filter made of the fields given as keywords (a keyword at its default is not given);
        both at once is an error, not a silent merge."""
        defaults = {f.name: f.default for f in fields(cls)}
        unknown = sorted(set(given) - set(defaults))
        if unknown:
            raise TypeError(f"search filter: no field {', '.join(unknown)} (fields: {', '.join(defaults)})")
        changed = {name: value for name, value in given.items() if not _is_default(value, defaults[name])}
        if type is not None:
            changed["type"] = str(type)
        if where is None:
            return cls(**changed)
        if not isinstance(where, SearchFilter):
            raise TypeError(f"where must be a SearchFilter, not {_shown(where)}")
        if changed:
            raise ValueError(f"give the search filter either as `where` or as keywords, not both "
                             f"({', '.join(sorted(changed))} given beside `where`)")
        return where


STATUSES = ("active", "archived", "quarantined", "superseded")
"""Every status a point's payload names (memory/pool/points.py: payload_of)."""


def _is_default(value: Any, default: Any) -> bool:
    """Whether a keyword was left as it is (None or "" for a name, no names for a list, the default for a flag)."""
    if default is None:
        return value is None or value == ""
    if default == ():
        return not isinstance(value, (str, bytes)) and hasattr(value, "__len__") and len(value) == 0
    return value is default


def _names(field: str, value: Iterable[str] | None) -> tuple[str, ...]:
    """A list of names as a tuple; one bare string is refused (it would be read as its characters)."""
    if isinstance(value, (str, bytes)):
        raise TypeError(f"search filter: {field} must be a list of names, not the single string {value!r} "
                        f"(write [{value!r}])")
    try:
        names = tuple(value or ())
    except TypeError:
        raise TypeError(f"search filter: {field} must be a list of names, not {_shown(value)}") from None
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise TypeError(f"search filter: {field} must hold names (strings), not {_shown(bad[0])}")
    return names


def _outcomes() -> str:
    return ", ".join(o.value for o in Outcome)


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {str(value)[:60]!r}"
