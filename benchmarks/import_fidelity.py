"""How much of real agent logs the importers keep: steps and observation characters, in the file vs imported.

    python benchmarks/import_fidelity.py LOG_OR_DIR [...]

For every file the importer reads, counts what the file itself holds, independently of the importer:
the actions (SWE-agent: trajectory entries; mini-swe-agent: executed actions — ``extra.actions``, tool calls, or
replies with exactly one action block) and the characters of their observations (SWE-agent: ``observation``;
mini-swe-agent: the output blocks of observation messages, or ``extra.raw_output`` when present). Then what the
import kept: steps and observation characters (cut markers and ``[warning]``/``[exception]`` lines included).
Files that are not runs (demonstrations) and files that fail are counted with their reason.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from mtl_graph.importers import UnknownFormatError, import_file, iter_log_files
from mtl_graph.importers.agents.mini_swe_agent import ACTION_PATTERNS

_OUTPUT_BLOCKS = re.compile(r"<(output|output_head|output_tail)>\n?(.*?)\n?</\1>", re.S)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def _mini_in_file(messages: list[dict[str, Any]]) -> tuple[int, int]:
    actions = chars = 0
    for m in messages:
        content = _text(m.get("content"))
        extra = m.get("extra") if isinstance(m.get("extra"), dict) else {}
        if m.get("role") == "assistant":
            if isinstance(extra.get("actions"), list):
                actions += len(extra["actions"])
            elif m.get("tool_calls"):
                actions += len(m["tool_calls"])
            else:
                found = next((p.findall(content) for p in ACTION_PATTERNS if p.search(content)), [])
                actions += len(found) == 1
        elif m.get("role") in ("user", "tool"):
            if isinstance(extra.get("raw_output"), str):
                chars += len(extra["raw_output"])
            elif content.lstrip().startswith("{") and '"returncode"' in content:
                obj = json.loads(content)
                chars += sum(len(str(obj.get(k, ""))) for k in ("output", "output_head", "output_tail"))
            else:
                chars += sum(len(b) for _, b in _OUTPUT_BLOCKS.findall(content))
    return actions, chars


def in_file(path: Path) -> tuple[int, int] | None:
    """(actions, observation characters) the file holds, for the formats this script knows; else None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if isinstance(data, dict) and isinstance(data.get("trajectory"), list):
        steps = [s for s in data["trajectory"] if isinstance(s, dict)]
        return len(steps), sum(len(_text(s.get("observation"))) for s in steps)
    messages = data.get("messages") if isinstance(data, dict) else data
    if isinstance(messages, list) and all(isinstance(m, dict) and "role" in m for m in messages):
        return _mini_in_file(messages)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args()
    totals: Counter[str] = Counter()
    for path in iter_log_files(args.paths):
        result = import_file(path)
        if result.skipped is not None:
            totals["not runs"] += 1
            print(f"skip  {path}: {result.skipped.reason}")
            continue
        if result.errors and not result.runs:
            totals["unknown format" if isinstance(result.errors[0], UnknownFormatError) else "failed files"] += 1
            print(f"fail  {path}: {result.errors[0].reason}")
            continue
        held = in_file(path)
        steps = sum(len(t.steps) for t in result.runs)
        chars = sum(len(s.observation) for t in result.runs for s in t.steps)
        cuts = sum("characters cut ...]" in s.observation for t in result.runs for s in t.steps)
        totals.update({"files": 1, "steps kept": steps, "observation chars kept": chars, "cut markers": cuts})
        if held is not None:
            totals.update({"actions in files": held[0], "observation chars in files": held[1]})
        fmt = result.runs[0].source_format if result.runs else "?"
        where = f"{held[0]} actions / {held[1]} chars in the file; " if held else ""
        print(f"ok    {path} [{fmt}]: {where}kept {steps} steps / {chars} chars ({cuts} cut markers)")
    print("\n" + "; ".join(f"{k}: {v}" for k, v in totals.items()))


if __name__ == "__main__":
    main()
