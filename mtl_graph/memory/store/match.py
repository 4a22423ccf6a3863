"""What a LangGraph store op means, independent of the engine: filters, namespace matches, validation.

The filter language is the one LangGraph's InMemoryStore (and PostgresStore) accept: a value filter maps field
names to a value (equality; dicts match key by key, lists element by element) or to an operator dict with $eq,
$ne, $gt, $gte, $lt, $lte (the ordering operators compare as numbers). PoolStore evaluates them in Python over
its item table, so a filter means exactly what it means in InMemoryStore.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langgraph.store.base import InvalidNamespaceError, MatchCondition, Op, PutOp, validate_op_namespace

from mtl_graph.core.errors import MTLError

OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
NUMERIC = frozenset({"$gt", "$gte", "$lt", "$lte"})
MTL_ROOT = "mtl"
"""The root label under which the pool's memories appear (read-only)."""


class StoreError(MTLError, ValueError):
    """A store operation that cannot run: its input is invalid (nothing was written)."""


class StoreReadOnlyError(StoreError):
    """A write into ("mtl", ...): the pool's memories are read through the store, written through the pool."""


class StoreClosedError(MTLError, RuntimeError):
    """An operation on a PoolStore after `close()`."""


def matches(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """Whether an item's value passes a value filter (every field must)."""
    return not flt or all(_compare(value.get(name), wanted) for name, wanted in flt.items())


def _compare(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(found, op, arg) for op, arg in wanted.items())
        return isinstance(found, dict) and all(_compare(found.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (isinstance(found, (list, tuple)) and len(found) == len(wanted)
                and all(_compare(f, w) for f, w in zip(found, wanted)))
    return found == wanted


def _operator(found: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return found == arg
    if op == "$ne":
        return found != arg
    try:  # as InMemoryStore: the ordering operators compare numbers; a value that is none never matches
        left, right = float(found), float(arg)
    except (TypeError, ValueError):
        return False
    return {"$gt": left > right, "$gte": left >= right, "$lt": left < right, "$lte": left <= right}[op]


def check_filter(flt: Any) -> None:
    """A filter's shape, before anything runs: a dict of fields, operators known, ordering operands numbers."""
    if flt is None:
        return
    if not isinstance(flt, Mapping):
        raise StoreError(f"a search filter must be a dict of field -> value, not {type(flt).__name__}")
    for name, wanted in flt.items():
        if not isinstance(name, str):
            raise StoreError(f"filter field names must be strings, got {name!r}")
        if isinstance(wanted, dict) and any(str(k).startswith("$") for k in wanted):
            for op, arg in wanted.items():
                if op not in OPERATORS:
                    raise StoreError(f"unsupported filter operator {op!r} on {name!r} "
                                     f"(supported: {', '.join(sorted(OPERATORS))})")
                if op in NUMERIC and (isinstance(arg, bool) or not isinstance(arg, (int, float))):
                    raise StoreError(f"filter {name!r}: {op} needs a number, got {arg!r}")


def namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """A list_namespaces prefix / suffix condition ("*" matches any one label)."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        part = namespace[:len(path)]
    elif condition.match_type == "suffix":
        part = namespace[len(namespace) - len(path):]
    else:
        raise StoreError(f"unsupported namespace match type {condition.match_type!r} (expected prefix or suffix)")
    return all(p == "*" or p == label for p, label in zip(path, part))


def check_op(op: Op) -> None:
    """One op's input, as BaseStore validates it (namespaces) plus what a put must carry; raises StoreError."""
    namespace = getattr(op, "namespace", getattr(op, "namespace_prefix", None))
    if namespace is not None and not isinstance(namespace, tuple):
        raise StoreError(f"a namespace is a tuple of strings, not {type(namespace).__name__}: {namespace!r}")
    try:
        validate_op_namespace(op)
    except InvalidNamespaceError as exc:
        raise StoreError(str(exc)) from None
    if isinstance(op, PutOp):
        if not op.namespace:
            raise StoreError("namespace cannot be empty")
        if op.namespace[0] == "langgraph":
            raise StoreError(f'the root label of a namespace cannot be "langgraph": {op.namespace}')
        if op.namespace[0] == MTL_ROOT:
            raise StoreReadOnlyError(f"{op.namespace} is read-only: the pool's memories appear under (\"mtl\", "
                                     "<format>) for reading; write memories with MemoryPool.add")
        if not isinstance(op.key, str) or not op.key:
            raise StoreError(f"an item key is a non-empty string, got {op.key!r}")
        if op.value is not None:
            if not isinstance(op.value, Mapping):
                raise StoreError(f"an item's value must be a dict, not {type(op.value).__name__}")
            try:
                json.dumps(dict(op.value), allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise StoreError(f"the value of {op.namespace}/{op.key} is not JSON-serializable ({exc})") from None
        if op.ttl is not None and (isinstance(op.ttl, bool) or not isinstance(op.ttl, (int, float)) or op.ttl <= 0):
            raise StoreError(f"ttl is a positive number of minutes or None, got {op.ttl!r}")
    limit, offset = getattr(op, "limit", 0), getattr(op, "offset", 0)
    if not isinstance(limit, int) or not isinstance(offset, int) or limit < 0 or offset < 0:
        raise StoreError(f"limit and offset must be non-negative integers, got limit={limit!r}, offset={offset!r}")
