"""A served MTL graph under load, killed mid-wave: nothing lost or duplicated (issue 32 item 5).

`langgraph dev` serves graphs/mtl.py on one pool (online mode: write-back and credit on; a scripted model that
emits real tool calls; commands in the bwrap sandbox, unless --sandbox says otherwise). Clients drive it through
the HTTP API (langgraph-sdk), each creating a thread per run and joining it:

  wave 1   one client x --runs runs               runs per minute, p95 of MTL's own time per run
  wave 2   --clients clients x --runs runs        the same under load
  wave 3   the same again, and half-way through the server's whole process group gets SIGKILL; it is started
           again on the same pool and the same checkpointer (`.langgraph_api`, which `langgraph dev` flushes
           every 10 s), which re-queues the runs it finds left running; a run or thread it never flushed is
           submitted again by its client.

Runs cycle through the example tasks, and each retrieves --top-k memories with no relevance floor, so every
memory is retrieved and credited by many runs of the other tasks at once (a task's own memories never are: the
contamination guard). MTL's own time of a run is the sum of its node
timings (its thread's final state) minus `execute` (the agent's model calls and commands).

Then, with the server stopped (once it runs nothing more: a restarted one re-runs what its last flush saw
running, finished runs included), the counts that must hold, per request a client saw finish: its memory holds
one provenance entry of its run and no memory holds one of a run no client saw (an attempt re-run under another
id), each memory it was shown holds one credit entry of it and none of an unseen run, no half-written memory,
`mtl pool check` clean, no workspace file or quota mount left, no process left with the server's TMPDIR, and the
per-process sandbox files the stopped server could not remove gone once the next process makes its own.

    python benchmarks/served_load.py                      # 16 clients x 8 runs (make bench-load)
    python benchmarks/served_load.py --clients 4 --runs 2  # a quick look
    QDRANT_URL=http://localhost:6333 python benchmarks/served_load.py   # the pool on a Qdrant server
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LANGGRAPH = Path(sys.executable).parent / "langgraph"
MTL = Path(sys.executable).parent / "mtl"
TASKS = ["slugify", "primes", "csv-totals"]
NOT_MTL = {"execute"}
"""Node timings that are the agent's (its model calls and commands), not MTL's own."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`langgraph dev` in a process group of its own, restartable on the same directory and port."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir, self.env, self.port = workdir, env, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = open(self.workdir / f"server-{self.starts}.log", "w")
        self.proc = subprocess.Popen([str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1",
                                      "--port", str(self.port), "--config", "langgraph.json"],
                                     cwd=self.workdir, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        from langgraph_sdk import get_sync_client

        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"langgraph dev exited with {self.proc.returncode}: see {log.name}")
            try:
                get_sync_client(url=self.url).assistants.search()
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise SystemExit(f"langgraph dev did not start in 120 s: see {log.name}")
                time.sleep(0.5)

    def kill(self) -> None:
        """SIGKILL to the whole process group: the server, its workers and whatever they started."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class Request:
    """One run a client asked for, followed until the server finished it."""

    client: int
    task: str
    submits: int = 0
    server_runs: list[str] = field(default_factory=list)
    thread: str = ""
    status: str = ""
    values: dict = field(default_factory=dict)
    seconds: float = 0.0


def is_missing(exc: Exception) -> bool:
    return getattr(getattr(exc, "response", None), "status_code", None) == 404


def drive(url: str, request: Request, context: dict, up: threading.Event) -> Request:
    """Submit the request and join it; through a dead server, wait for it to be back and join the same run again,
    or submit again when the restarted server never heard of the run (it was not flushed before the kill)."""
    import httpx
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url, timeout=httpx.Timeout(600, connect=5))
    start = time.perf_counter()
    thread = run = None
    task = str(ROOT / "examples" / "tasks" / request.task)
    while True:
        up.wait()
        try:
            if run is None:
                thread = client.threads.create()["thread_id"]
                run = client.runs.create(thread, "mtl", input={"task": task}, context=context)["run_id"]
                request.submits += 1
                request.server_runs.append(run)
                request.thread = thread
            client.runs.join(thread, run)
            got = client.runs.get(thread, run)
            if got["status"] in ("pending", "running"):
                continue  # joined a run the restarted server re-queued
            request.status = got["status"]
            request.values = client.threads.get_state(thread)["values"] if got["status"] == "success" else {}
            request.seconds = time.perf_counter() - start
            return request
        except Exception as exc:  # a dead server, or one that lost the thread or run with its last flush
            if is_missing(exc):
                run = None
            else:
                time.sleep(0.5)


def wave(server: Server, clients: int, runs: int, context_for, kill_after: int | None = None) -> dict:
    """clients x runs requests; with kill_after, SIGKILL the server once that many have finished, then restart it."""
    up, done, lock = threading.Event(), [0], threading.Lock()
    up.set()
    killed: dict = {}

    def client_loop(c: int) -> list[Request]:
        out = []
        for i in range(runs):
            task = TASKS[(c + i) % len(TASKS)]
            request = drive(server.url, Request(client=c, task=task), context_for(task), up)
            out.append(request)
            with lock:
                done[0] += 1
                if kill_after is not None and done[0] == kill_after and not killed:
                    killed["at"] = done[0]
                    up.clear()
                    server.kill()
                    t = time.perf_counter()
                    server.start()
                    killed["restart_s"] = round(time.perf_counter() - t, 1)
                    up.set()
        return out

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        requests = [r for batch in pool.map(client_loop, range(clients)) for r in batch]
    wall = time.perf_counter() - start
    return {"requests": requests, "wall_s": wall, "killed": killed}


def runs_of(client, thread: str) -> list[dict]:
    try:
        return client.runs.list(thread, limit=100)
    except Exception as exc:  # a thread the restarted server never heard of runs nothing
        if is_missing(exc):
            return []
        raise


def settle(server: Server, requests: list[Request]) -> None:
    """Wait until the server runs nothing more: a restarted one re-runs what its last flush saw running."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=server.url)
    threads = {r.thread for r in requests if r.thread}
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        busy = [t for t in threads if any(run["status"] in ("pending", "running") for run in runs_of(client, t))]
        if not busy:
            return
        time.sleep(2)


def mtl_seconds(values: dict) -> float:
    """A finished run's node timings (its thread's state: the run log's are written before write back's own)."""
    return sum(v for k, v in (values.get("timings") or {}).items() if k not in NOT_MTL)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))] if ordered else float("nan")


def run_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def summary(name: str, result: dict) -> dict:
    seconds = [mtl_seconds(r.values) for r in result["requests"] if r.values.get("timings")]
    return {"wave": name, "requests": len(result["requests"]), "wall_s": round(result["wall_s"], 1),
            "runs_per_min": round(60 * len(result["requests"]) / result["wall_s"], 1),
            "mtl_p95_ms": round(1000 * p95(seconds), 1),
            "statuses": dict(Counter(r.status for r in result["requests"])),
            "resubmitted": sum(r.submits - 1 for r in result["requests"]), **result["killed"]}


def counts(pool_location: str, namespace: str, log: list[dict], requests: list[Request], workdir: Path) -> dict:
    """What must hold once the server is stopped, counted per request a client made (see the module's docstring).

    Each finished request is one MTL run (`run_id` in its thread's final state): its memory holds one provenance
    entry of that run, the memories it was shown one credit entry each, the run log one line. Anything more in
    the pool or the log is a duplicate (an attempt the server ran again under another id), anything less a loss."""
    from mtl_graph.memory.pool.pool import MemoryPool
    from mtl_graph.memory.usage import CREDIT_KEY

    done = [r for r in requests if r.status == "success"]
    pool = MemoryPool.open(pool_location, namespace=namespace)
    try:
        sources: Counter = Counter()  # run id -> provenance entries naming it, over every memory
        credit: set = set()  # (memory, run id) of every credit entry
        half = 0
        for hit in pool.store.scroll():
            memory = pool.get(hit.id)
            if memory is None:
                half += 1
                continue
            sources.update(s.run_id for s in memory.sources)
            credit.update((hit.id, run) for run in (hit.payload.get(CREDIT_KEY) or {}))
    finally:
        pool.close()
    wrote = [r for r in done if r.values.get("new_memory_ids")]
    want_credit = {(m, r.values["run_id"]) for r in done if (r.values.get("credit") or {}).get("credited")
                   for m in r.values["credit"]["shown"]}
    runs = {r.values.get("run_id") for r in done}
    logged = Counter(rec.get("run_id") for rec in log)
    check = subprocess.run([str(MTL), "pool", "check", pool_location], capture_output=True, text=True) \
        if not pool_location.startswith("http") else None
    tmp = workdir / "tmp"
    files = [p.relative_to(tmp) for p in tmp.rglob("*") if not p.is_dir()]
    workspaces = [str(p) for p in files if p.parts[0].startswith(("mtl-workspaces-", "mtl-pristine-", "mtl-check-"))]
    staged = [str(p) for p in files if p.parts[0].startswith("mtl-") and str(p) not in workspaces]
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
              if line.split()[1].startswith(str(workdir))]  # a workspace's quota mount
    swept = next_start_sweeps(tmp) if staged else []
    mine = f"TMPDIR={tmp}".encode()  # every process the server started has it in its environment
    processes = [pid for pid in os.listdir("/proc") if pid.isdigit() and mine in _environ(pid).split(b"\0")]
    return {
        "requests": len(requests), "finished": len(done),
        "passed": sum(1 for r in done if (r.values.get("verdict") or {}).get("status") == "pass"),
        "memory_writes_expected": len(wrote),
        "memory_writes_missing": sum(1 for r in wrote if sources[r.values["run_id"]] == 0),
        "memory_writes_twice_one_id": sum(1 for r in wrote if sources[r.values["run_id"]] > 1),
        "memory_writes_of_other_runs": sum(n for run, n in sources.items() if run not in runs),
        "credit_entries_expected": len(want_credit),
        "credit_entries_missing": len(want_credit - credit),
        "credit_entries_of_other_runs": len({c for c in credit if c[1] not in runs}),
        "run_log_lines": len(log), "run_log_lines_of_other_runs": sum(n for run, n in logged.items()
                                                                       if run not in runs),
        "run_log_lines_twice_one_id": sum(n - 1 for run, n in logged.items() if run in runs and n > 1),
        "half_written_memories": half,
        "pool_check": "not run (server pool)" if check is None else
                      ("ok" if check.returncode == 0 else check.stdout.strip()[-300:]),
        "leftover_workspace_files": len(workspaces), "leftover_workspace_examples": workspaces[:3],
        "leftover_per_process_files": len(staged),
        "leftover_per_process_examples": sorted({p.split("/")[0] for p in staged})[:4],
        "leftover_per_process_files_after_next_start": len(swept),
        "leftover_mounts": len(mounts),
        "leftover_processes": len(processes),
    }


def next_start_sweeps(tmp: Path) -> list[str]:
    """What is left of the per-process files once the next process of ours makes its own (a sandbox's first
    command): a server stopped by SIGTERM runs no exit hook (uvicorn re-raises the signal), one killed neither."""
    code = ("from mtl_graph.sandbox.bwrap import staged_etc\nfrom mtl_graph.sandbox.config import SandboxConfig\n"
            "from mtl_graph.sandbox.seccomp import filter_file\nstaged_etc(SandboxConfig().etc_allow)\nfilter_file()\n")
    subprocess.run([sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)},
                   check=True)
    return [str(p) for p in tmp.rglob("*") if not p.is_dir() and p.relative_to(tmp).parts[0].startswith(
        ("mtl-etc-", "mtl-seccomp-"))]


def _environ(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients in waves 2 and 3")
    parser.add_argument("--runs", type=int, default=8, help="runs per client in each wave")
    parser.add_argument("--top-k", type=int, default=2, help="memories each run retrieves")
    parser.add_argument("--sandbox", default="bwrap", help="bwrap (default), local or docker")
    parser.add_argument("--dir", type=Path, help="keep the server's directory here (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()

    workdir = (args.dir or Path(tempfile.mkdtemp(prefix="served-load-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "tmp").mkdir(exist_ok=True)
    (workdir / "langgraph.json").write_text(json.dumps({"dependencies": [str(ROOT)],
                                                        "graphs": {"mtl": f"{ROOT}/graphs/mtl.py:graph"}}))
    pool_location = os.environ.get("QDRANT_URL") or str(workdir / "pool")
    env = {**os.environ, "MTL_POOL": pool_location, "MTL_RUN_LOG": str(workdir / "runs.jsonl"),
           "MTL_SANDBOX": args.sandbox, "TMPDIR": str(workdir / "tmp"), "LANGSMITH_TRACING": "false",
           "LANGGRAPH_CLI_NO_ANALYTICS": "1", "PYTHONPATH": str(ROOT), "MTL_NAMESPACE": f"load-{uuid.uuid4().hex[:8]}"}
    env.pop("MTL_MODEL", None)
    server = Server(workdir, env)
    server.start()
    results, requests = [], []
    try:
        warm = wave(server, 1, 1, lambda task: context_for(task, args.top_k))  # loads the embedding model once
        requests += warm["requests"]
        for name, clients, kill in [("1 client", 1, False), (f"{args.clients} clients", args.clients, False),
                                    (f"{args.clients} clients, SIGKILL mid-wave", args.clients, True)]:
            result = wave(server, clients, args.runs, lambda task: context_for(task, args.top_k),
                          kill_after=(clients * args.runs) // 2 if kill else None)
            requests += result["requests"]
            results.append((name, result))
            print(f"{name}: {len(result['requests'])} runs in {result['wall_s']:.1f} s", flush=True)
        settle(server, requests)
    finally:
        server.stop()
    log = run_log(workdir / "runs.jsonl")
    table = [summary(name, result) for name, result in results]
    found = counts(pool_location, env["MTL_NAMESPACE"], log, requests, workdir)
    out = {"machine": machine(), "clients": args.clients, "runs": args.runs, "waves": table, "counts": found,
           "dir": str(workdir)}
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))


def context_for(task: str, top_k: int) -> dict:
    """A run's context: online, and the scripted model replaying its task's own demo script (real tool calls)."""
    return {"model": f"scripted:{ROOT / 'examples' / 'tasks' / task / 'demo_script.json'}", "online": True,
            "top_k": top_k, "relevance_floor": -1.0}


def machine() -> dict:
    import platform
    from importlib.metadata import version

    return {"cpus": os.cpu_count(), "loadavg": Path("/proc/loadavg").read_text().split()[:3],
            "python": platform.python_version(), **{p: version(p) for p in ("langgraph", "langgraph-api",
                                                                           "langgraph-runtime-inmem")}}


if __name__ == "__main__":
    main()
