"""Ingest at the speed of its parts: nothing stored is embedded again, a text is redacted and screened once, and
the report says how fast it went (issue 32, item 6)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

from helpers.paths import LOGS
from helpers.screen_benign import benign_texts
from helpers.screen_corpus import hostile_cases
from mtl_graph.distill.distillers import distill
from mtl_graph.importers import load_many
from mtl_graph.importers.ingest import IngestConfig, Ledger, ingest
from mtl_graph.memory.base import MemoryType, Provenance
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.memory.screening import screen
from mtl_graph.redaction.redact import Redactor

RUNS = [LOGS / "mini_swe_agent", LOGS / "swe_agent"]
TRAJECTORY = IngestConfig(formats=[MemoryType.TRAJECTORY])


class Counting(Embeddings):
    """The real embedder, counting the texts it is asked to embed."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner, self.texts = inner, []
        self.model_name = inner.model_name

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


@pytest.fixture
def counted(embeddings):
    counting = Counting(embeddings)
    with MemoryPool.open(":memory:", counting) as opened:
        yield opened, counting


def _insight(text: str, run: str, task: str = "task") -> InsightMemory:
    return InsightMemory(title=text[:60].strip() or "advice", description=text[:600].strip() or "advice",
                         content=text, sources=[Provenance(run_id=run, source_task_id=task, domain="d")])


def _memories(n: int, run: str) -> list[InsightMemory]:
    return [_insight(f"When a {topic} test fails, read the traceback's last frame before editing.", run, f"task-{i}")
            for i, topic in enumerate(["parser", "cache", "timezone", "unicode", "retry"][:n])]


def test_re_adding_stored_memories_embeds_nothing(counted) -> None:
    pool, counting = counted
    first = pool.add_many(_memories(5, "run-a"))
    assert first.counts["added"] == 5 and len(counting.texts) == 5
    counting.texts.clear()
    assert pool.add_many(_memories(5, "run-a")).counts["identical"] == 5
    # the same content from another run: the stored memory gains the run (a payload update), nothing is embedded
    assert pool.add_many(_memories(5, "run-b")).counts["identical"] == 5
    assert counting.texts == []
    # a batch with one new memory embeds that one only, and the known ones still gain their run
    extra = _insight("Pin the interpreter version in CI before bisecting a flaky import.", "run-c", "task-9")
    report = pool.add_many([*_memories(2, "run-c"), extra])
    assert [r.status for r in report] == ["identical", "identical", "added"] and counting.texts == [extra.key_text()]
    assert sorted(s.run_id for s in pool.get(first[0].id).sources) == ["run-a", "run-b", "run-c"]


def test_re_ingesting_the_same_logs_embeds_nothing(counted, tmp_path: Path) -> None:
    pool, counting = counted
    assert ingest(RUNS, pool, None, TRAJECTORY).count("ingested") == 3
    counting.texts.clear()
    again = ingest(RUNS, pool, None, TRAJECTORY, ledger=Ledger(None))  # no ledger: every run distilled again
    assert again.count("ingested") == 3 and again.written()["identical"] == 3
    assert counting.texts == []


def test_a_run_is_redacted_once_on_its_way_into_the_pool(counted) -> None:
    pool, _ = counted
    redactor = Redactor()
    loaded, _ = load_many(RUNS)
    made = [m for item in loaded for m in distill(item.trajectory, [MemoryType.TRAJECTORY], redactor=redactor).memories]
    assert made
    before = redactor.clean.scans
    pool.add_many(made)  # the pool's own redactor has the same configuration: it knows the distiller's output
    assert redactor.clean.scans == before


def test_a_known_clean_text_changed_afterwards_is_redacted_again() -> None:
    redactor = Redactor()
    text = "pytest output\n" + "collected 12 items, all passed\n" * 20
    assert redactor.redact(text) == text
    scans = redactor.clean.scans
    assert redactor.redact(text) == text and redactor.clean.scans == scans  # known: not scanned
    leaky = text + "export GITHUB_TOKEN=ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2 + "\n"
    assert "ghp_" not in redactor.redact(leaky) and redactor.clean.scans == scans + 1
    # what was redacted as given text (a readable example password stays) is not clean as ordinary text
    given = "Set the admin password: password = 'open sesame' and log in.\n" * 8
    as_given = redactor.redact(given, given=True)
    assert redactor.redact(as_given) == Redactor(fast=False).redact(as_given)


def test_screening_each_content_once_gives_the_same_verdicts() -> None:
    texts = [case.text for case in hostile_cases()[::8]] + benign_texts()[::3]
    memories = [_insight(text[:2000], "r") for text in texts if text.strip()]
    fresh = [screen._screen_rules(m) for m in memories]
    assert [screen.screen_rules(m) for m in memories] == fresh  # screened now, remembered
    assert [screen.screen_rules(m) for m in memories] == fresh  # remembered
    assert sum(bool(f) for f in fresh) > len(memories) // 3  # the hostile ones are flagged


def test_bad_logs_are_reported_and_the_good_ones_counted(tmp_path: Path, counted) -> None:
    pool, _ = counted
    good = LOGS / "mini_swe_agent" / "pallets__flask-4992.traj.json"
    shutil.copy(good, tmp_path / good.name)
    raw = good.read_bytes()
    (tmp_path / "truncated.traj.json").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "latin1.traj.json").write_bytes(raw.replace(b"config", "confïg".encode("latin-1")))
    report = ingest([tmp_path], pool, None, TRAJECTORY)
    assert [r.task_id for r in report.runs if r.status == "ingested"] == ["pallets__flask-4992"]
    failures = {Path(f.path).name: f.reason for f in report.file_failures}
    assert set(failures) == {"truncated.traj.json", "latin1.traj.json"}
    assert "UTF-8" in failures["latin1.traj.json"] and "JSON" in failures["truncated.traj.json"]
    assert report.log_bytes == sum(p.stat().st_size for p in tmp_path.iterdir())
    speed = report.throughput()
    assert report.seconds > 0 and speed["mb_per_s_before_embedding"] >= speed["mb_per_s"] > 0
    assert len(pool) == 1
