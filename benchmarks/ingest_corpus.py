"""A large, realistic corpus of agent logs for the ingest benchmark, grown from the real shapes in tests/fixtures.

    python benchmarks/ingest_corpus.py OUT_DIR [--sessions 300] [--mb 60] [--seed 3]

Each session is a copy of one fixture log (Claude Code, OpenHands, mini-swe-agent, SWE-agent, Codex sessions)
with its ids made unique, its task text varied and its long text values (tool output, file reads, thoughts)
lengthened with slices of this repository's own source and docs, the kind of text a coding agent reads and
prints. The same seed gives the same corpus. Use real public runs instead when you have them: this stands in
for them on a machine without a download.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SOURCES = [  # (fixture, suffix of the copy's file name: the importers find files by their name)
    ("agent_logs/claude_code/5b0c2f4e-9a1d-4c7e-8f3b-2d6a1e9c7b40.jsonl", ".jsonl"),
    ("agent_logs/screening/7d1e4a2b-3c5f-4a6b-9c8d-0e1f2a3b4c5d.jsonl", ".jsonl"),
    ("agent_logs/openhands/shelfapp-pagination.json", ".json"),
    ("agent_logs/openhands/ledger__ledger-214.json", ".json"),
    ("logs/mini_swe_agent/pallets__flask-4992.traj.json", ".traj.json"),
    ("logs/mini_swe_agent/astropy__astropy-12907.traj.json", ".traj.json"),
    ("logs/swe_agent/django__django-11099.traj", ".traj"),
    ("agent_logs/codex/rollout-2025-10-02T14-10-00-0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b.jsonl", ".jsonl"),
]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_TASK_WORDS = ["parser", "cache", "migration", "timezone", "unicode", "pagination", "retry", "logging", "config",
               "serializer", "scheduler", "importer", "router", "fixture", "encoder", "validator"]


def _reading(rng: random.Random, text: str, size: int) -> str:
    start = rng.randrange(0, max(1, len(text) - size))
    return text[start:start + size]


def _grow(value, rng: random.Random, reading: str, extra: int):
    """Long strings (outputs, file reads, thoughts) get a slice of real text appended."""
    if isinstance(value, dict):
        return {k: _grow(v, rng, reading, extra) for k, v in value.items()}
    if isinstance(value, list):
        return [_grow(v, rng, reading, extra) for v in value]
    if isinstance(value, str) and len(value) > 120 and "\n" in value or isinstance(value, str) and len(value) > 400:
        return value + "\n" + _reading(rng, reading, rng.randrange(extra // 4, extra))
    return value


def _vary(text: str, rng: random.Random, n: int) -> str:
    """Fresh ids (one new uuid per old one, so references still match) and a task word per copy."""
    fresh: dict[str, str] = {}
    text = _UUID.sub(lambda m: fresh.setdefault(m.group(0), str(uuid.UUID(int=rng.getrandbits(128), version=4))), text)
    return text.replace("Fix it", f"Fix it in the {rng.choice(_TASK_WORDS)} module (ticket {n})", 1)


def _copy(raw: str, suffix: str, rng: random.Random, n: int, reading: str, extra: int) -> str:
    raw = _vary(raw, rng, n)
    if suffix == ".jsonl":
        return "".join(json.dumps(_grow(json.loads(line), rng, reading, extra)) + "\n"
                       for line in raw.splitlines() if line.strip())
    return json.dumps(_grow(json.loads(raw), rng, reading, extra), indent=1)


def generate(out: Path, sessions: int, megabytes: float, seed: int) -> int:
    """Writes the corpus; returns its size in bytes."""
    rng = random.Random(seed)
    reading = "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "mtl_graph").rglob("*.py"))
                        + sorted((ROOT / "docs").glob("*.md")))
    originals = [((FIXTURES / rel).read_text(encoding="utf-8"), suffix, Path(rel).name) for rel, suffix in SOURCES]
    # the size grows linearly with the text added per long string: two trial copies of each log fit the line
    def trial(extra: int) -> int:
        r = random.Random(seed)
        return sum(len(_copy(raw, suffix, r, 0, reading, extra)) for raw, suffix, _ in originals)
    low, high = trial(400), trial(4400)
    per_session = megabytes * 2**20 / sessions * len(originals)
    extra = max(400, int(400 + (per_session - low) * 4000 / max(1, high - low)))
    out.mkdir(parents=True, exist_ok=True)
    total = 0
    for n in range(sessions):
        raw, suffix, name = originals[n % len(originals)]
        stem = name[: -len(suffix)]
        if _UUID.fullmatch(stem) or stem.startswith("rollout-"):  # Claude Code / Codex name a session by its id
            stem = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            stem = f"rollout-2025-10-02T14-10-00-{stem}" if name.startswith("rollout-") else stem
        else:
            stem = f"{stem}-{n}"
        body = _copy(raw, suffix, rng, n, reading, extra)
        (out / f"{stem}{suffix}").write_text(body, encoding="utf-8")
        total += len(body.encode("utf-8"))
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--mb", type=float, default=60.0, help="about how many megabytes of logs to write")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    size = generate(args.out, args.sessions, args.mb, args.seed)
    print(f"{args.sessions} sessions, {size / 2**20:.1f} MB in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
