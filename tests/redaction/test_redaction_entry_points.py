"""Every way text enters the system redacts it: `mtl memories add` / `import`, the run log, the judge's prompt, the
distillers and `mtl ingest` — checked with the generated secret corpus on real components (embedded pool, local
embedder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.secret_corpus import Gen, secret_cases
from helpers.secret_corpus_located import encoded_and_located_cases
from helpers.secret_look_alikes import look_alikes
from typer.testing import CliRunner

from mtl_graph.cli import app
from mtl_graph.distill.distillers import distill
from mtl_graph.importers.ingest import IngestConfig, ingest
from mtl_graph.judging.judges import JudgeConfig, LLMJudge
from helpers.fake_models import RoutedChatModel
from mtl_graph.core.trajectory import Step, Trajectory, Verdict, VerdictStatus
from mtl_graph.pipeline.run_log import append_run_log
from mtl_graph.memory.base import MemoryType, Provenance, UsageStats
from mtl_graph.memory.formats.insight import InsightMemory
from mtl_graph.memory.formats.trajectory import TrajectoryMemory, TrajectoryStep
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.core.task import TaskRef

CASES = secret_cases(11)
ALL_SECRETS = [s for c in CASES for s in c.secrets]
SHA = "3f2a9c1d8e7b6a5f4c3d2e1f0a9b8c7d6e5f4a3b"


def leaked(text: str) -> list[str]:
    return [s for s in ALL_SECRETS if s in text]


def leaky_run() -> Trajectory:
    """A run whose every text field holds secrets, one corpus case per step, plus look-alikes."""
    steps = [Step(action=f"cat config-{i}", args={"command": f"cat config-{i}"}, observation=c.text, exit_code=0)
             for i, c in enumerate(CASES)]
    steps.append(Step(action="git log -1", observation=f"commit {SHA}\n" + look_alikes(11)[0].text, exit_code=0))
    return Trajectory(task=TaskRef(id="leaky", domain="ops", instruction=f"Deploy with {CASES[0].text}"),
                      steps=steps, submission=CASES[1].text, model="openai/gpt-test",
                      verdict=Verdict(status=VerdictStatus.PASS, reason=CASES[2].text, source="tests"))


def test_run_log_is_redacted(tmp_path: Path) -> None:
    log = tmp_path / "runs.jsonl"
    append_run_log(log, {"record": "run", **json.loads(leaky_run().model_dump_json())})
    text = log.read_text()
    assert not leaked(text) and SHA in text
    json.loads(text)  # still one valid JSON line


def test_judge_prompt_is_redacted() -> None:
    judge = LLMJudge(RoutedChatModel(script=[]), JudgeConfig(budget_tokens=200_000, observation_chars=20_000))
    prompt = "\n".join(m.content for m in judge.prompt(leaky_run()))
    assert not leaked(prompt)
    assert prompt.count("[REDACTED:") >= len(ALL_SECRETS) and SHA in prompt


def test_distilled_trajectory_memory_is_redacted() -> None:
    result = distill(leaky_run(), ["trajectory"])
    [memory] = result.memories
    assert not leaked(memory.model_dump_json()) and SHA in memory.model_dump_json()


@pytest.fixture
def pool_dir(tmp_path: Path) -> Path:
    return tmp_path / "pool"


def stored(pool_dir: Path, embeddings) -> str:
    pool = MemoryPool.open(str(pool_dir), embeddings=embeddings)
    try:
        return "\n".join(m.model_dump_json() for m in pool)
    finally:
        pool.close()


def leaky_memories() -> list:
    g = Gen(12)
    token, password = f"ghp_{g.b62(36)}", g.password()
    insight = InsightMemory(title="Authenticate the registry before pushing",
                            description=f"Log in first: docker login -u ci -p {password} registry.example.com",
                            content=f"Clone with https://{token}@github.com/acme/app.git, then check commit {SHA}.",
                            outcome="success", sources=[Provenance(domain="ops", source_task_id="o1")],
                            stats=UsageStats(retrieved=4, retrieved_success=3))
    traj = TrajectoryMemory(task="Rotate the database password", outcome="failure",
                            steps=[TrajectoryStep(command="cat .env", observation=CASES[0].text),
                                   TrajectoryStep(command="psql", observation=CASES[1].text)],
                            sources=[Provenance(domain="ops", source_task_id="o2")])
    return [insight, traj], [token, password, *CASES[0].secrets, *CASES[1].secrets]


@pytest.mark.parametrize("command", ["add", "import"])
def test_memories_add_and_import_redact(command: str, tmp_path: Path, pool_dir: Path, embeddings) -> None:
    memories, secrets = leaky_memories()
    src = tmp_path / "leaky.jsonl"
    src.write_text("".join(m.model_dump_json() + "\n" for m in memories))
    result = CliRunner().invoke(app, ["memories", command, str(src), "--pool", str(pool_dir)])
    assert result.exit_code == 0, result.output
    assert "2 added" in result.output
    text = stored(pool_dir, embeddings)
    assert not [s for s in secrets if s in text]
    assert "-p [REDACTED:password] registry.example.com" in text and SHA in text
    assert {m.id for m in memories}.isdisjoint(json.loads(line)["id"] for line in text.splitlines())
    [insight] = [json.loads(line) for line in text.splitlines() if "Authenticate" in line]
    assert insight["stats"]["retrieved"] == (4 if command == "import" else 0)  # import keeps stats, add resets


def test_clean_memory_keeps_its_id(tmp_path: Path, pool_dir: Path, embeddings) -> None:
    clean = InsightMemory(title="Run the tests", description="Verify each edit.", content=f"See commit {SHA}.",
                          outcome="success")
    src = tmp_path / "clean.jsonl"
    src.write_text(clean.model_dump_json() + "\n")
    assert CliRunner().invoke(app, ["memories", "import", str(src), "--pool", str(pool_dir)]).exit_code == 0
    assert json.loads(stored(pool_dir, embeddings))["id"] == clean.id


def test_ingest_redacts_a_foreign_run_log(tmp_path: Path, pool_dir: Path, embeddings) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    record = {"record": "run", **json.loads(leaky_run().model_dump_json())}
    (logs / "runs.jsonl").write_text(json.dumps(record) + "\n")  # written by another tool: not redacted
    pool = MemoryPool.open(str(pool_dir), embeddings=embeddings)
    try:
        report = ingest([logs], pool, None, IngestConfig(formats=[MemoryType.TRAJECTORY]))
        assert report.count("ingested") == 1, report
        text = "\n".join(m.model_dump_json() for m in pool)
    finally:
        pool.close()
    assert not leaked(text) and SHA in text


def test_the_pool_api_redacts_every_write(pool_dir: Path, embeddings) -> None:
    """A caller of MemoryPool.add / add_many (not only the CLI) cannot store a secret: add_many redacts."""
    memories, secrets = leaky_memories()
    pool = MemoryPool.open(str(pool_dir), embeddings=embeddings)
    try:
        report = pool.add_many(memories[:1])
        pool.add(memories[1])
        assert report.counts["added"] == 1 and memories[0].id not in {r.id for r in report}
    finally:
        pool.close()
    text = stored(pool_dir, embeddings)
    assert not [s for s in secrets if s in text]
    assert "[REDACTED:" in text and SHA in text


NEW_CLASS_LOOK_ALIKES = {"build_serial_with_akia", "k8s_configmap_like_data", "kubeconfig_certificates",
                         "url_users_not_tokens", "hex_values_of_other_names", "webhook_docs_and_settings",
                         "query_strings_without_credentials", "calls_without_password_literals",
                         "colon_lines_not_pgpass"}


@pytest.mark.parametrize("command", ["add", "ingest"])
def test_encoded_and_located_secrets_never_reach_the_pool(command: str, tmp_path: Path, pool_dir: Path,
                                                          embeddings) -> None:
    """Base64 Secret / kubeconfig values, URL-user tokens, SECRET_KEY_BASE hex, webhook paths, query signatures,
    positional passwords and .pgpass lines, through `mtl memories add` and `mtl ingest`; their look-alikes stay."""
    cases = encoded_and_located_cases(13)
    secrets = [s for c in cases for s in c.secrets]
    kept = [item for item in look_alikes(13) if item.id in NEW_CLASS_LOOK_ALIKES]
    assert len(kept) == len(NEW_CLASS_LOOK_ALIKES) and len(cases) >= 25
    if command == "add":
        memories = [TrajectoryMemory(task=f"Inspect config {i}", outcome="failure",
                                     steps=[TrajectoryStep(command=f"cat config-{i}", observation=c.text)],
                                     sources=[Provenance(domain="ops", source_task_id=f"n{i}")])
                    for i, c in enumerate(cases)]
        memories += [TrajectoryMemory(task=f"Read notes {i}", outcome="success",
                                      steps=[TrajectoryStep(command=f"cat notes-{i}", observation=item.text)],
                                      sources=[Provenance(domain="ops", source_task_id=f"k{i}")])
                     for i, item in enumerate(kept)]
        src = tmp_path / "leaky.jsonl"
        src.write_text("".join(m.model_dump_json() + "\n" for m in memories))
        args = ["memories", "add", str(src), "--pool", str(pool_dir)]
    else:
        steps = [Step(action=f"cat config-{i}", observation=c.text, exit_code=0) for i, c in enumerate(cases)]
        steps += [Step(action=f"cat notes-{i}", observation=item.text, exit_code=0) for i, item in enumerate(kept)]
        run = Trajectory(task=TaskRef(id="new-classes", domain="ops", instruction="Audit the deployment config"),
                         steps=steps, model="openai/gpt-test",
                         verdict=Verdict(status=VerdictStatus.PASS, reason="done", source="tests"))
        logs = tmp_path / "logs"
        logs.mkdir()
        (logs / "runs.jsonl").write_text(json.dumps({"record": "run", **json.loads(run.model_dump_json())}) + "\n")
        args = ["ingest", str(logs), "--pool", str(pool_dir), "--formats", "trajectory"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = stored(pool_dir, embeddings)
    observations = [step["observation"] for line in text.splitlines() for step in json.loads(line).get("steps", [])]
    assert len(observations) >= len(cases) + len(kept)
    assert not [s for s in secrets if s in text]
    assert all(item.text in observations for item in kept)
