"""`langgraph dev` serving our graphs (graphs/ and the scripted ones in tests/graphs/served) for the tests of a server."""

import json
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import pytest

from helpers.paths import ROOT, SERVED

LANGGRAPH = Path(sys.executable).parent / "langgraph"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_lines(tmp_path: Path) -> list[dict]:
    """The server's run log so far, one record per run."""
    log = tmp_path / "runs.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@contextmanager
def serve(tmp_path: Path, graphs: dict[str, str], env: dict[str, str], ready: Callable[[str], object]):
    """`langgraph dev` serving `graphs` from tmp_path with environment `env`; yields its URL once `ready(url)` stops
    raising (90 s at most), and stops the server afterwards. Its output is in tmp_path/server.log."""
    if not LANGGRAPH.exists():
        pytest.skip("langgraph-cli[inmem] is not installed (pip install -e '.[test]')")
    (tmp_path / "langgraph.json").write_text(json.dumps({"dependencies": [str(ROOT)], "graphs": graphs}))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp_path / "server.log", "w") as log:
        proc = subprocess.Popen([str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
                                 "--port", str(port), "--config", "langgraph.json"],
                                cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 90
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"langgraph dev exited with {proc.returncode}:\n"
                                f"{(tmp_path / 'server.log').read_text()[-3000:]}")
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=1):
                        ready(url)
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        pytest.fail("langgraph dev did not start in 90 s")
                    time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@contextmanager
def langgraph_dev(tmp_path, **env_vars):
    """`langgraph dev` serving our graphs from tmp_path, with `env_vars` in its environment; yields (client, tmp_path)."""
    graphs = {
        "scripted": f"{SERVED}/scripted_graph.py:graph",
        "scripted_review": f"{SERVED}/scripted_graph.py:review_graph",
        "scripted_stream": f"{SERVED}/scripted_graph.py:stream_graph",
        "scripted_context": f"{SERVED}/scripted_graph.py:context_graph",
        "mtl": f"{ROOT}/graphs/mtl.py:graph",
        "pool_view": f"{ROOT}/graphs/pool_view.py:graph",
        "blocking": f"{SERVED}/blocking_graph.py:graph",
        "crashing": f"{SERVED}/crashing_graph.py:graph",
    }
    env = {**os.environ, "MTL_POOL": str(tmp_path / "pool"), "MTL_RUN_LOG": str(tmp_path / "runs.jsonl"),
           "LANGSMITH_TRACING": "false", "LANGGRAPH_CLI_NO_ANALYTICS": "1", **env_vars}
    env.pop("MTL_MODEL", None)
    from langgraph_sdk import get_sync_client

    with serve(tmp_path, graphs, env, ready=lambda url: get_sync_client(url=url).assistants.search()) as url:
        yield get_sync_client(url=url), tmp_path
