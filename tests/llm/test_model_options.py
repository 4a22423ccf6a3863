"""Model settings reach the real client, bad ones are one clear error, and a dead server ends the agent with
model_error (the run is recorded as an error, never as the agent's failure)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mtl_graph.agent import AgentConfig, DefaultAgent
from mtl_graph.llm.chat import ModelNotConfigured, chat_model
from mtl_graph.cli import app
from mtl_graph.pipeline import build_mtl_graph
from mtl_graph.memory.pool.pool import MemoryPool
from mtl_graph.core.task import Task
from helpers.paths import EXAMPLES


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: connections are refused


def test_options_configure_the_real_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = chat_model("openai:local", {"base_url": "http://127.0.0.1:9/v1", "max_tokens": 64, "temperature": 0.2,
                                        "timeout": 5})
    assert (model.openai_api_base, model.max_tokens, model.temperature, model.request_timeout) == (
        "http://127.0.0.1:9/v1", 64, 0.2, 5.0)


@pytest.mark.parametrize("options, field", [({"temperature": 9}, "temperature"), ({"max_tokens": 0}, "max_tokens"),
                                            ({"base_urll": "x"}, "base_urll")])
def test_bad_options_are_one_clear_error(options: dict, field: str) -> None:
    with pytest.raises(ModelNotConfigured, match=field):
        chat_model("openai:local", options)


def test_cli_rejects_a_bad_agent_option(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", str(EXAMPLES / "primes"), "--model", "openai:local", "--pool",
                                      ":memory:", "--action-format", "smoke-signals"])
    assert result.exit_code == 1
    assert "invalid --action-format 'smoke-signals'" in result.output


def test_dead_server_ends_the_agent_with_model_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    options = {"base_url": f"http://127.0.0.1:{closed_port()}/v1", "timeout": 2, "max_retries": 0}
    from mtl_graph.cli.progress import stream_run

    events: list[dict] = []
    with MemoryPool.open(":memory:") as pool:
        graph = build_mtl_graph("openai:local", pool, memory_type="insight", sandbox="local", model_options=options,
                                agent=DefaultAgent(AgentConfig(step_limit=2)), run_log=tmp_path / "runs.jsonl")
        state = stream_run(graph, {"task": Task.from_dir(EXAMPLES / "primes")}, events.append)
        assert pool.count() == 0  # nothing distilled from a run the model never took part in
    agent = next(e for e in events if e["kind"] == "agent")
    assert agent["exit_status"] == "model_error" and "Connection" in agent["error"]
    assert state["trajectory"]["exit_status"] == "model_error"
    assert state["verdict"]["status"] == "error"  # the provider failed, not the agent: no failure memory, no debit


def test_the_retry_settings_own_retries_the_client_makes_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    model = chat_model("openai:gpt-4o-mini")
    assert model.max_retries == 0 and model.root_client.max_retries == 0  # openai's own default would be 2
    assert chat_model("openai:gpt-4o-mini", {"max_retries": 4}).root_client.max_retries == 4  # asked for: kept


def test_a_rate_limited_judge_costs_exactly_the_attempts_of_the_retry_settings(monkeypatch) -> None:
    """A real OpenAI client against a server that answers every request with 429: the judge's call is made
    `attempts` times in all (before: the client's 2 retries x 3 structured attempts x 3 node attempts = 27)."""
    import http.server
    import threading

    from mtl_graph.llm.retry import RetrySettings, using_retry
    from mtl_graph.core.task import TaskRef
    from mtl_graph.core.trajectory import Trajectory
    from mtl_graph.judging.judges import LLMJudge

    hits: list[str] = []

    class Limited(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            hits.append(self.path)
            self.rfile.read(int(self.headers.get("content-length", 0)))
            body = b'{"error": {"message": "slow down", "type": "rate_limit"}}'
            self.send_response(429)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Limited)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    try:
        model = chat_model("openai:local", {"base_url": f"http://127.0.0.1:{server.server_port}/v1", "timeout": 5})
        trajectory = Trajectory(task=TaskRef(id="t", instruction="Write poem.txt"), steps=[], submission="done")
        with using_retry(RetrySettings(attempts=3, initial_delay=0)):
            verdict = LLMJudge(model).judge(trajectory)
    finally:
        server.shutdown()
    assert len(hits) == 3 and verdict.is_error
    assert verdict.reason.startswith("model provider error: judge: ") and "RateLimitError (HTTP 429)" in verdict.reason
