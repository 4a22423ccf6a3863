"""A results directory: config.json (what is computed), results.jsonl (one line per run), pool.json."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mtl_graph.bench.records import EvalConfig, Pool, TaskResult
from mtl_graph.bench.passk import is_error
from mtl_graph.core.errors import MTLError

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
RESULTS_FILE = "results.jsonl"
POOL_FILE = "pool.json"
SUITES_FILE = "suites.json"


class StoreError(MTLError, ValueError):
    """The results directory cannot be used (a different configuration, unreadable files)."""


def _diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return [f"{k}: {old.get(k)!r} (stored) vs {new.get(k)!r} (now)"
            for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]


def read_config(root: Path) -> EvalConfig:
    """The configuration a results directory was made with."""
    path = Path(root) / CONFIG_FILE
    if not path.is_file():
        raise StoreError(f"{root}: not a results directory (no {CONFIG_FILE})")
    try:
        return EvalConfig.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path}: unreadable configuration ({exc})") from None


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class ResultStore:
    """Append-only results with resume: ``done()`` tells the harness what to skip."""

    def __init__(self, root: str | Path, config: EvalConfig | None = None):
        """Open root; with a config, create it on first use or refuse one made with a different config."""
        self.root = Path(root)
        self._lock = threading.Lock()
        self.skipped_lines = 0
        if config is None:
            self.config = read_config(self.root)
        else:
            self.root.mkdir(parents=True, exist_ok=True)
            if (self.root / CONFIG_FILE).exists():
                stored = read_config(self.root)
                diffs = _diff(stored.identity(), config.identity())
                if diffs:
                    raise StoreError(
                        f"{self.root} holds results of a different configuration, and mixing them would make "
                        f"the numbers meaningless: {'; '.join(diffs)}. Use another output directory, or "
                        "rerun with the stored options to resume.")
            elif (self.root / RESULTS_FILE).exists():
                raise StoreError(
                    f"{self.root}: has {RESULTS_FILE} but no {CONFIG_FILE}; refusing to guess its configuration")
            _write_atomic(self.root / CONFIG_FILE, config.model_dump_json(indent=2))
            self.config = config
        self._repair_tail()

    @property
    def results_path(self) -> Path:
        return self.root / RESULTS_FILE

    def _repair_tail(self) -> None:
        """Drop a partial last line left by an interrupted write, so the next append starts cleanly."""
        path = self.results_path
        if not path.exists() or path.stat().st_size == 0:
            return
        with open(path, "rb+") as fh:
            data = fh.read()
            if data.endswith(b"\n"):
                return
            cut = data.rfind(b"\n") + 1
            log.warning("%s: dropping an incomplete last line (%d bytes) from an interrupted run", path, len(data) - cut)
            fh.truncate(cut)

    def results(self) -> list[TaskResult]:
        """Every stored result, the last line winning for a repeated key (a retried error)."""
        latest: dict[tuple, TaskResult] = {}
        self.skipped_lines = 0
        if not self.results_path.exists():
            return []
        with open(self.results_path, encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    result = TaskResult.model_validate_json(line)
                except ValidationError:
                    self.skipped_lines += 1
                    log.warning("%s:%d: unreadable result line skipped (it will be rerun)", self.results_path, lineno)
                    continue
                latest[result.key] = result
        return list(latest.values())

    def done(self) -> set[tuple[str, str, str, int]]:
        """Keys of results that need no rerun (errored runs are retried)."""
        return {r.key for r in self.results() if not is_error(r)}

    def append(self, result: TaskResult) -> None:
        """Append one result as one write: an interruption leaves at most one partial line."""
        data = (result.model_dump_json() + "\n").encode("utf-8")
        with self._lock:
            fd = os.open(self.results_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                while data:
                    data = data[os.write(fd, data):]
            finally:
                os.close(fd)

    def save_pool(self, pool: Pool) -> None:
        _write_atomic(self.root / POOL_FILE, pool.model_dump_json(indent=2))

    def load_pool(self) -> Pool | None:
        path = self.root / POOL_FILE
        if not path.exists():
            return None
        try:
            return Pool.model_validate_json(path.read_text(encoding="utf-8"))
        except (ValidationError, UnicodeDecodeError) as exc:
            raise StoreError(f"{path}: unreadable pool ({exc}); delete it to redo phase 2") from None

    def write_json(self, name: str, data: Any) -> Path:
        path = self.root / name
        _write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False))
        return path
