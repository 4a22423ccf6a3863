"""The pool's files: export every memory as JSONL, import a JSONL file line by line (`MemoryPool` inherits these)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from mtl_graph.memory.dedup import AddReport
from mtl_graph.memory.errors import PoolError
from mtl_graph.memory.base import Memory, first_validation_error, parse_memory


@dataclass
class ImportReport:
    """The outcome of importing a JSONL file."""

    results: AddReport = field(default_factory=AddReport)
    errors: list[str] = field(default_factory=list)


class PoolFiles:
    """Mixin of MemoryPool: JSONL export and import (through `add_many`, which redacts and screens)."""

    def export(self, path: str | Path) -> int:
        """Write every memory (with provenance and stats) as JSONL; returns the count."""
        n = 0
        with open(path, "w", encoding="utf-8") as fh:
            for memory in self:
                fh.write(memory.model_dump_json() + "\n")
                n += 1
        return n

    def import_jsonl(self, path: str | Path, batch_size: int = 256, keep_stats: bool = True) -> ImportReport:
        """Add every valid line of a JSONL file; bad lines are reported as `file:line: why`."""
        report = ImportReport()
        batch: list[Memory] = []
        try:
            fh = open(path, "rb")  # decoded line by line: one bad line must not cost the good ones
        except OSError as exc:
            raise PoolError(f"cannot read {path}: {exc.strerror}") from None
        with fh:
            for lineno, raw in enumerate(fh, 1):
                try:
                    # an editor's BOM, as ingest allows (on any line: exports joined with cat keep theirs)
                    line = raw.decode("utf-8").removeprefix("\ufeff")
                    if not line.strip():
                        continue
                    batch.append(parse_memory(json.loads(line)))  # add_many redacts it
                except UnicodeDecodeError:
                    report.errors.append(f"{path}:{lineno}: not UTF-8 text")
                except json.JSONDecodeError as exc:
                    report.errors.append(f"{path}:{lineno}: malformed JSON ({exc.msg})")
                except RecursionError:  # the decoder's own limit: no memory nests that deep
                    report.errors.append(f"{path}:{lineno}: malformed JSON (nested too deeply)")
                except ValidationError as exc:
                    report.errors.append(f"{path}:{lineno}: invalid memory ({first_validation_error(exc)})")
                if len(batch) >= batch_size:
                    report.results += self.add_many(batch, keep_stats=keep_stats)
                    batch = []
        report.results += self.add_many(batch, keep_stats=keep_stats)
        return report
