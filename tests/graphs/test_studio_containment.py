"""A LangGraph server serving graphs/mtl.py gives its clients nothing of its own, driven over `langgraph dev`'s
HTTP API (one server for every case): no server directory copied into a workspace (task paths, a dict task's
source_dir, links and `..` out of a task root, a thread update after the input was checked), no setup network,
no `scripted:` file outside the task roots and no file's contents in an error, no model endpoint or provider the
server does not list, no server directory taken as a run's workspace. The allowed paths still run."""

from __future__ import annotations

import json
import os
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from helpers.paths import ROOT
from helpers.studio import langgraph_dev

CANARY = "-".join(["mtl", "canary", "7f3e91"])
"""Written into every server file a client must never see; it must appear in no answer, state or run log."""
SERVER_KEY = "sk-" + "proj" + "Q" * 8 + "server" + "9" * 8
"""The server's provider key (made here, never a real one): it must never reach an endpoint a client names."""
FAST = {"memory_type": "none", "online": False}


class Recorder(BaseHTTPRequestHandler):
    """A loopback HTTP endpoint that records every request it gets and answers 400 (a non-retried error)."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        length = int(self.headers.get("content-length") or 0)
        self.server.seen.append({"path": self.path, "auth": self.headers.get("authorization"),
                                 "body": self.rfile.read(length).decode(errors="replace")})
        body = b'{"error": {"message": "no", "type": "invalid_request_error"}}'
        self.send_response(400)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args) -> None:
        pass


def endpoint() -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def write_task(path: Path, check: str = "test -f done", **files: str) -> Path:
    (path / "files").mkdir(parents=True)
    (path / "task.md").write_text("Create a file named done.\n")
    (path / "task.json").write_text(json.dumps({"id": f"contain/{path.name}", "check": check}))
    for name, text in files.items():
        (path / "files" / name).write_text(text)
    return path


def script(path: Path, *actions: dict) -> Path:
    path.write_text(json.dumps({"actions": list(actions)}))
    return path


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """The server's files: secrets outside the task roots, a task root with honest tasks and hostile links."""
    base = tmp_path_factory.mktemp("containment")
    secret = base / "secret"
    write_task(secret, id_rsa=f"-----BEGIN KEY----- {CANARY}\n")
    (secret / "task.md").write_text(f"Instructions only the server may read: {CANARY}\n")
    (secret / "files" / ".env").write_text(f"OPENAI_API_KEY={CANARY}\n")
    script(secret / "script.json", {"bash": f"echo {CANARY}"}, {"submit": CANARY})
    roots = base / "roots"
    echo = write_task(roots / "echo", hello="hi\n")
    script(echo / "solve.json", {"bash": "touch done"}, {"submit": "done"})
    # What the agent would do with whatever the server copied: print it, so a leak shows in the trajectory.
    script(echo / "snoop.json", {"bash": "cat * .env 2>&1 | head -50; touch done"}, {"submit": "done"})
    (roots / "link-out").symlink_to(secret)
    (roots / "md-link").mkdir()
    (roots / "md-link" / "task.md").symlink_to(secret / "task.md")
    (roots / "files-link").mkdir()
    (roots / "files-link" / "task.md").write_text("Look around.\n")
    (roots / "files-link" / "files").symlink_to(secret / "files")
    (roots / "not-a-script.json").write_text(json.dumps({CANARY: CANARY, "actions": [{CANARY: CANARY}]}))
    (roots / "wrong-type.json").write_text(json.dumps({"actions": [{"bash": [CANARY]}]}))
    (roots / "not-json.txt").write_text(f"{CANARY}\n{{ not json\n")
    (roots / "not-utf8.json").write_bytes(b"\xff\xfe" + CANARY.encode())
    write_task(base / "roots-evil" / "task", id_rsa=CANARY)  # a sibling whose name starts like the root's
    (base / "roots-evil" / "task" / "task.md").write_text(CANARY)
    victim = base / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_text(CANARY)
    return base


@pytest.fixture(scope="module")
def served(layout):
    hostile, allowed = endpoint(), endpoint()
    allowed_url = f"http://127.0.0.1:{allowed.server_port}/v1"
    env = {"MTL_TASK_ROOTS": os.pathsep.join([str(layout / "roots"), str(ROOT / "examples" / "tasks")]),
           "MTL_ALLOWED_BASE_URLS": json.dumps([allowed_url + "/"]), "MTL_ALLOWED_PROVIDERS": "openai",
           "OPENAI_API_KEY": SERVER_KEY}
    try:
        with langgraph_dev(layout, **env) as (client, _):
            yield {"client": client, "hostile": hostile, "allowed": allowed, "allowed_url": allowed_url,
                   "hostile_port": hostile.server_port}
    finally:
        hostile.shutdown()
        allowed.shutdown()


def run(client, task, context=None):
    """One run on a fresh thread: (its answer, the thread's whole state)."""
    thread = client.threads.create()["thread_id"]
    out = client.runs.wait(thread, "mtl", input={"task": task}, context={**FAST, **(context or {})})
    return out, thread


RUNS_AT_ONCE = 4
"""Independent runs sent side by side: a run's answer waits on the server's queue, not on this machine's cores."""


def run_all(client, cases) -> list:
    """run() for each (task, context), RUNS_AT_ONCE at a time, each on its own thread; the answers in order."""
    with ThreadPoolExecutor(RUNS_AT_ONCE) as pool:
        return list(pool.map(lambda case: run(client, *case), cases))


def assert_contained(served, layout, out, thread, *reasons: str) -> str:
    """The run ended in one line saying why, and nothing of the server's secrets reached the client."""
    error = out["error"]
    assert error and "\n" not in error and any(r in error for r in reasons), error
    seen = json.dumps([out, served["client"].threads.get_state(thread)["values"]])
    assert CANARY not in seen and SERVER_KEY not in seen
    log = layout / "runs.jsonl"
    assert CANARY not in (log.read_text() if log.exists() else "")
    return error


def snoop(layout) -> dict:
    return {"model": f"scripted:{layout / 'roots' / 'echo' / 'snoop.json'}"}


def hostile_task_paths(layout) -> list[str]:
    roots, secret = layout / "roots", layout / "secret"
    return [str(secret), f"{secret}/", f"{secret}/.", f"/{secret}", f"{roots}/../secret", f"{roots}/echo/../../secret",
            str(roots / "link-out"), str(roots / "md-link"), str(roots / "files-link"),
            str(layout / "roots-evil" / "task"), "secret", "./roots/../secret", "~", "/", str(roots) + "\x00x",
            str(roots / "nonexistent")]


def test_task_paths_and_source_dirs_outside_the_roots_copy_nothing(served, layout):
    client = served["client"]
    paths = hostile_task_paths(layout)
    for path, (out, thread) in zip(paths, run_all(client, [(path, snoop(layout)) for path in paths]), strict=True):
        assert_contained(served, layout, out, thread, "outside this server's task roots",
                         "task directory not found")
        assert out.get("trajectory") is None, path  # refused before any workspace was made
    roots, secret = layout / "roots", layout / "secret"
    tasks = [{"id": "x", "instruction": "Look around.", "source_dir": str(source), "check": "true"}
             for source in (secret / "files", f"{roots}/../secret/files", roots / "files-link" / "files",
                            "secret/files", roots / "link-out" / "files")]
    for out, thread in run_all(client, [(task, snoop(layout)) for task in tasks]):
        assert_contained(served, layout, out, thread, "source_dir")

    # A thread update after the input was checked: the next node checks the task again.
    out, thread = run(client, str(roots / "echo"), {"model": f"scripted:{roots / 'echo' / 'solve.json'}"})
    assert out["error"] is None and out["verdict"]["status"] == "pass"
    for task in (str(secret), {"id": "x", "instruction": "Look.", "source_dir": str(secret / "files")}):
        client.threads.update_state(thread, {"task": task, "error": None}, as_node="plan")
        out = client.runs.wait(thread, "mtl", input=None, context={**FAST, **snoop(layout)})
        assert_contained(served, layout, out, thread, "outside this server's task roots")


def test_a_client_task_gets_no_setup_network(served, layout):
    client, listener = served["client"], endpoint()
    reach = f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {listener.server_port}), 3)\""
    tasks = [{"id": "net", "instruction": "Look.", "files": {"a.txt": "a"}, "setup": reach, "setup_network": flag,
              "check": "true"} for flag in (True, "true", 1, "yes")]
    for out, thread in run_all(client, [(task, snoop(layout)) for task in tasks]):
        assert_contained(served, layout, out, thread, "setup_network")
    listener.shutdown()
    assert listener.seen == []


def test_scripted_models_only_inside_the_roots_and_no_file_in_an_error(served, layout):
    client, roots, secret = served["client"], layout / "roots", layout / "secret"
    task = str(roots / "echo")
    outside = [secret / "script.json", f"{roots}/../secret/script.json", roots / "link-out" / "script.json",
               "secret/script.json", secret / "files" / ".env", secret / "files" / "id_rsa", "/etc/passwd"]
    for out, thread in run_all(client, [(task, {"model": f"scripted:{path}"}) for path in outside]):
        error = assert_contained(served, layout, out, thread, "scripted model file")
        assert "outside this server's task roots" in error
    inside = ["not-a-script.json", "wrong-type.json", "not-json.txt", "not-utf8.json", "nonexistent.json"]
    # inside the roots, not action scripts: the error names the file, never its text
    for out, thread in run_all(client, [(task, {"model": f"scripted:{roots / name}"}) for name in inside]):
        assert "cannot load scripted model" in assert_contained(served, layout, out, thread, "invalid action script")


def test_model_endpoints_and_providers_only_when_the_server_lists_them(served, layout):
    client, hostile = served["client"], served["hostile"]
    port = served["hostile_port"]
    task = {"id": "m", "instruction": "Say hi.", "files": {"a.txt": "a"}, "check": "true"}
    urls = (f"http://127.0.0.1:{port}/v1", f"http://127.0.0.1:{port}/v1/", f"HTTP://127.0.0.1:{port}/v1",
            f"http://u:p@127.0.0.1:{port}/v1", f"http://127.0.0.1:{port}/v1?x=1",
            f"{served['allowed_url']}/../../v1@127.0.0.1:{port}", f"http://localhost:{port}/v1")
    contexts = [{"model": "openai:gpt-4o-mini", "model_options": {"base_url": url, "max_retries": 0}} for url in urls]
    for out, thread in run_all(client, [(task, context) for context in contexts]):
        assert "model_options.base_url" in assert_contained(served, layout, out, thread, "refused")
    models = ("anthropic:claude-3-5-haiku-latest", "gpt-4o-mini", "ollama:llama3", "OpenAI:gpt-4o-mini")
    for out, thread in run_all(client, [(task, {"model": model}) for model in models]):
        assert_contained(served, layout, out, thread, "MTL_ALLOWED_PROVIDERS")
    assert hostile.seen == []

    # A listed endpoint is used (with the server's key: the operator chose to trust it).
    allowed = served["allowed"]
    context = {"model": "openai:gpt-4o-mini", "model_options": {"base_url": served["allowed_url"], "max_retries": 0},
               "step_limit": 1}
    out, _ = run(client, task, context)
    assert "refused" not in (out["error"] or "") and out["verdict"]["status"] == "error"
    assert allowed.seen and allowed.seen[0]["path"] == "/v1/chat/completions"
    assert allowed.seen[0]["auth"] == f"Bearer {SERVER_KEY}"


def test_a_thread_update_cannot_name_a_server_directory_as_the_workspace(served, layout):
    client, roots, victim = served["client"], layout / "roots", layout / "victim"
    out, thread = run(client, str(roots / "echo"), {"model": f"scripted:{roots / 'echo' / 'solve.json'}"})
    assert out["verdict"]["status"] == "pass"
    workspaces = Path(tempfile.gettempdir()) / f"mtl-workspaces-{os.geteuid()}"
    for workspace in (str(victim), f"{workspaces}/../{victim.relative_to('/')}", str(workspaces),
                      f"{workspaces}/x/../../{victim.relative_to('/')}"):
        client.threads.update_state(thread, {"workspace": workspace, "error": None}, as_node="execute")
        out = client.runs.wait(thread, "mtl", input=None, context=FAST)
        assert_contained(served, layout, out, thread, "is not one this server made")
        assert (victim / "keep.txt").read_text() == CANARY
    client.threads.update_state(thread, {"workspace": str(victim), "error": "declined"}, as_node="execute")
    client.runs.wait(thread, "mtl", input=None, context=FAST)  # write back: nothing of the server's is removed
    assert (victim / "keep.txt").read_text() == CANARY


def test_tasks_inside_the_roots_still_run(served, layout):
    client, roots = served["client"], layout / "roots"
    solve = {"model": f"scripted:{roots / 'echo' / 'solve.json'}"}
    inline = {"id": "inline", "instruction": "Create done.", "files": {"hello": "hi\n"}, "check": "test -f done"}
    in_root = {**inline, "files": {}, "source_dir": str(roots / "echo" / "files")}
    slugify = ROOT / "examples" / "tasks" / "slugify"
    cases = [(str(roots / "echo"), solve), (inline, solve), (in_root, solve),
             (str(slugify), {"model": f"scripted:{slugify / 'demo_script.json'}"})]
    for (task, _), (out, _) in zip(cases, run_all(client, cases), strict=True):
        assert out["error"] is None and out["verdict"]["status"] == "pass", task
