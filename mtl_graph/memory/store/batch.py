"""One batch of LangGraph store ops on PoolStore's item table (store_items.py): gets, searches, listings, puts."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    tokenize_path,
)

from mtl_graph.memory.store.items import ItemTable, Row
from mtl_graph.memory.store.match import StoreError, matches, namespace_matches


class TableBatch:
    """One batch on the item table: reads see the state before the batch, then puts apply (last put of a key
    wins), as in InMemoryStore."""

    def __init__(self, table: ItemTable, embeddings: Any, fields: list[tuple[str, Any]], now: datetime) -> None:
        self.table, self.embeddings, self.fields, self.now = table, embeddings, fields, now
        self.refreshed: dict[tuple[tuple[str, ...], str], Row] = {}

    def run(self, ops: list[Op]) -> list[Result]:
        vectors = self._query_vectors([op.query for op in ops if isinstance(op, SearchOp) and op.query])
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op, vectors.get(op.query or "")))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._namespaces(op))
            else:
                puts[(op.namespace, op.key)] = op
                results.append(None)
        if puts:
            self._put(list(puts.values()))
        touched = [r for k, r in self.refreshed.items() if k not in puts]
        if touched:
            self.table.touch(touched)
        return results

    def _visible(self, row: Row | None) -> bool:
        return row is not None and (row.expires_at is None or row.expires_at > self.now.timestamp())

    def _refresh(self, rows: Iterable[Row], refresh: bool) -> None:
        for row in rows:
            if refresh and row.ttl:
                row.expires_at = (self.now + timedelta(minutes=row.ttl)).timestamp()
                self.refreshed[(row.namespace, row.key)] = row

    def _get(self, op: GetOp) -> Item | None:
        row = self.table.rows.get((op.namespace, op.key))
        if not self._visible(row):
            return None
        assert row is not None
        self._refresh([row], op.refresh_ttl)
        return Item(value=copy.deepcopy(row.value), key=row.key, namespace=row.namespace,
                    created_at=row.created_at, updated_at=row.updated_at)

    def _search(self, op: SearchOp, vector: list[float] | None) -> list[SearchItem]:
        prefix, n = op.namespace_prefix, len(op.namespace_prefix)
        under = [r for r in self.table.rows.values() if r.namespace[:n] == prefix]
        found = sorted((r for r in under if self._visible(r) and matches(r.value, op.filter)),
                       key=lambda r: r.seq, reverse=True)
        ranked: list[tuple[float | None, Row]]
        if vector is not None:
            scored = self.table.nearest(vector, [r for r in found if r.vector_ids], op.offset + op.limit, prefix,
                                        sum(len(r.vector_ids) for r in under))
            # items without an embedded text rank after every scored one, as InMemoryStore appends them
            ranked = [*scored, *((None, r) for r in found if not r.vector_ids)]
        else:
            ranked = [(None, r) for r in found]
        page = ranked[op.offset:op.offset + op.limit]
        self._refresh((r for _, r in page), op.refresh_ttl)
        return [SearchItem(namespace=r.namespace, key=r.key, value=copy.deepcopy(r.value), created_at=r.created_at,
                           updated_at=r.updated_at, score=score) for score, r in page]

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = {r.namespace for r in self.table.rows.values() if self._visible(r)}
        found = {ns for ns in found if all(namespace_matches(c, ns) for c in op.match_conditions or ())}
        if op.max_depth is not None:
            found = {ns[:op.max_depth] for ns in found}
        return sorted(found)[op.offset:op.offset + op.limit]

    def _query_vectors(self, queries: list[str]) -> dict[str, list[float]]:
        emb = self.embeddings
        if emb is None or not queries:
            return {}
        return {q: self._checked(emb.embed_query(q)) for q in dict.fromkeys(queries)}

    def _checked(self, vector: list[float]) -> list[float]:
        if len(vector) != self.table.dims:
            raise StoreError(f"the index's embeddings returned a vector of size {len(vector)}; the store was "
                             f"configured with dims={self.table.dims}")
        return [float(x) for x in vector]

    def _texts(self, op: PutOp) -> list[tuple[str, str]]:
        """(path, text) pairs to embed for a put, named as InMemoryStore names them."""
        if self.embeddings is None or op.index is False or op.value is None:
            return []
        paths = self.fields if op.index is None else [(p, tokenize_path(p)) for p in op.index]
        out = []
        for path, tokens in paths:
            texts = get_text_at_path(op.value, tokens)
            out += [(f"{path}.{i}" if len(texts) > 1 else path, t) for i, t in enumerate(texts)]
        return out

    def _put(self, puts: list[PutOp]) -> None:
        gone = [(op.namespace, op.key) for op in puts if op.value is None]
        if gone:
            self.table.remove(gone)
        writes = [op for op in puts if op.value is not None]
        texts = {id(op): self._texts(op) for op in writes}
        flat = [t for op in writes for _, t in texts[id(op)]]
        vectors = iter([self._checked(v) for v in self.embeddings.embed_documents(flat)] if flat else [])
        rows = []
        for op in writes:
            old = self.table.rows.get((op.namespace, op.key))
            self.table.seq += 1
            rows.append((Row(op.namespace, op.key, json.loads(json.dumps(dict(op.value))),
                             old.created_at if self._visible(old) else self.now, self.now, self.table.seq, op.ttl,
                             (self.now + timedelta(minutes=op.ttl)).timestamp() if op.ttl else None),
                         [(path, next(vectors)) for path, _ in texts[id(op)]]))
        self.table.write(rows)
