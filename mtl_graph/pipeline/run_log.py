"""The run log: one redacted JSON line per run, which the `runlog` importer reads back."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from mtl_graph.core.safe_text import safe_json_text

_RUN_LOG_LOCK = threading.Lock()


def append_run_log(path: Path, record: dict[str, Any]) -> None:
    """Redact secrets, then append one JSON line (safe across threads of one process); importers read it back."""
    from mtl_graph.redaction.redact import redact_value

    line = safe_json_text(json.dumps(redact_value(record), ensure_ascii=False, default=str))
    path.parent.mkdir(parents=True, exist_ok=True)
    with _RUN_LOG_LOCK, open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")
