"""The whole system side by side, in one run and one table: retrieval (Qdrant part and end to end) at 1k / 10k /
100k memories beside LangGraph's InMemoryStore and a numpy exact scan, recall@3, writes and the worst single add,
a 20-step scripted task through the MTL graph beside the same agent alone, the SQLite checkpointer, tokens injected
per memory format, cold starts, the sandbox per command, peak RSS, and retrieval quality per embedding model.

Every figure has a baseline measured in the same run, so on a shared, busy machine the ratios stay meaningful.

    python benchmarks/system.py            # the full run (make bench)
    python benchmarks/system.py --quick    # small sizes, a minute or two (make bench-quick)
    python benchmarks/system.py --markdown FILE --json FILE
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import bench_graph  # noqa: E402
import bench_pool  # noqa: E402
import bench_process  # noqa: E402
import lifecycle  # noqa: E402
import quality  # noqa: E402
from retrieval import machine  # noqa: E402

from mtl_graph.memory.engine.storage import HNSW_EF  # noqa: E402

HEADER = ["figure", "measured (1k → 10k → 100k where it grows)", "baseline in the same run", "ratio", "target"]


def _ms(lat: bench_pool.Latency) -> str:
    return f"{lat.p50:.2f} / {lat.p95:.2f}"


def _grow(values: list[str]) -> str:
    return " → ".join(values)


def _x(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b else "—"


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def table(r: dict[str, Any], args: argparse.Namespace) -> list[list[str]]:
    rows: list[list[str]] = []
    sizes: list[bench_pool.SizeResult] = r["pool"]["sizes"]
    top = sizes[-1]
    labels = "/".join(f"{s.size // 1000}k" for s in sizes)
    ims = _grow([_ms(s.inmemory) for s in sizes])
    rows.append([f"retrieval p50 / p95 ms, Qdrant part (Edge hybrid, vector given) at {labels}",
                 _grow([_ms(s.qdrant) for s in sizes]), f"InMemoryStore {ims}",
                 f"{top.inmemory.p95 / top.qdrant.p95:.0f}× faster at p95", "—"])
    rows.append(["retrieval p50 / p95 ms, MemoryPool.search end to end, new query (embeds it)",
                 _grow([_ms(s.e2e_new) for s in sizes]), f"numpy exact scan {_grow([_ms(s.numpy) for s in sizes])}",
                 f"{top.inmemory.p95 / top.e2e_new.p95:.0f}× faster than InMemoryStore at p95",
                 f"≤ 5 ms p95: {_verdict(top.e2e_new.p95 <= 5)}"])
    rows.append(["retrieval p50 / p95 ms, MemoryPool.search end to end, repeated query (cached vector)",
                 _grow([_ms(s.e2e_cached) for s in sizes]), "the same search with a new query (row above)",
                 f"{top.e2e_new.p95 / top.e2e_cached.p95:.1f}× faster at p95",
                 f"≤ 5 ms p95: {_verdict(top.e2e_cached.p95 <= 5)}"])
    if all("cached_cpu_ms" in s.extra for s in sizes):
        rows.append(["retrieval CPU ms per search, median (all threads; load inflates it least): Qdrant part / "
                     "end to end with cached vector", _grow([f"{s.extra['qdrant_cpu_ms']:.2f} / "
                                                             f"{s.extra['cached_cpu_ms']:.2f}" for s in sizes]),
                     "—", "—", "—"])
    e = r["embed"]
    rows.append(["query embedding alone p50 / p95 ms (MiniLM-L6 int8, 1 thread, no cache)",
                 f"{e['query_p50_ms']:.2f} / {e['query_p95_ms']:.2f} ({e['query_tokens']:.0f} word pieces median)",
                 "—", "—", "—"])
    rows.append([f"recall@3 of the indexed dense path (hnsw_ef {HNSW_EF})", _grow([f"{s.recall:.3f}" for s in sizes]),
                 "numpy exact scan, same filter", "—", f"≥ 0.98: {_verdict(min(s.recall for s in sizes) >= 0.98)}"])
    rows.append(["indexing while the pool grew (index step after every 2k writes, then all indexed): CPU s in the "
                 "pool's process / in index workers, builds, segments",
                 _grow([f"{s.extra['process_cpu_s']:.1f} / {s.index_build_s:.1f}, {s.extra['builds']:.0f}, "
                        f"{s.segments}" for s in sizes]), "—", "—", "—"])
    writes = [s.writes_per_s for s in sizes]
    embed_rates = [s.extra.get("embed_per_s", e["batch_per_s"]) for s in sizes]
    rows.append([f"writes/s: add_many in batches of 50 ({args.writes} new memories: embed, dedup, upsert)",
                 _grow([f"{w:.0f}" for w in writes]),
                 f"embedding alone, same texts just before: {_grow([f'{r:.0f}' for r in embed_rates])} texts/s",
                 f"{_grow([f'{w / r:.2f}' for w, r in zip(writes, embed_rates)])} of embedding speed",
                 f"≥ 200/s: {_verdict(writes[-1] >= 200)}"])
    if "single_adds" in r["pool"]:
        a = r["pool"]["single_adds"]
        swap = f"{a['swap_s']:.2f} s" if a.get("swap_s") is not None else f"none ({a.get('build_error')})"
        rows.append([f"single add() into the {top.size // 1000}k pool during a background build of all of it "
                     f"({args.single_adds:,} in a row, then one per 20 ms until swapped in; vectors given)",
                     f"{a['adds']:,} adds: p50 {a['p50_ms']:.1f} ms; worst {a['worst_s']:.2f} s wall / "
                     f"{a['worst_cpu_s']:.2f} s CPU (call {a['worst_at']:,}); {a['over_1s']} calls > 1 s; the swap "
                     f"held the pool {swap}; {a['segments']} segments after",
                     "—", "—", f"worst ≤ 1 s: {_verdict(a['worst_s'] <= 1)}"])
    g = r["graph"]
    nodes = ", ".join(f"{k} {v * 1000:.0f}" for k, v in g["nodes_s"].items())
    rows.append([f"one {g['steps']}-step scripted task through the MTL graph ({g['sandbox']} sandbox)",
                 f"{g['graph_s']:.2f} s (nodes ms: {nodes})", f"the same agent alone {g['alone_s']:.2f} s",
                 _x(g["graph_s"], g["alone_s"]), f"≤ 1.15×: {_verdict(g['graph_s'] / g['alone_s'] <= 1.15)}"])
    per_run = g["checkpoint_ms"] * g["checkpoints_per_run"] / 1000
    rows.append(["checkpoints, SqliteSaver (each model call and each command is a super-step, saved before the next)",
                 f"{g['checkpoint_per_step_ms']:.1f} ms per agent step ({g['checkpoint_ms']:.1f} ms per checkpoint, "
                 f"{g['checkpoints_per_run']} per run; run {g['sqlite_s']:.2f} s)",
                 f"no checkpointer: run {g['graph_s']:.2f} s", f"{per_run / g['graph_s'] * 100:.1f}% of the run",
                 "report"])
    rows.append(["checkpoints, SqliteSaver on a WAL database (synchronous=NORMAL)",
                 f"{g['checkpoint_per_step_wal_ms']:.1f} ms per agent step (run {g['sqlite_wal_s']:.2f} s)",
                 f"default journal: {g['checkpoint_per_step_ms']:.1f} ms per agent step",
                 _x(g["checkpoint_per_step_ms"], g["checkpoint_per_step_wal_ms"]) + " less", "report"])
    t = g["tokens"]
    rows.append(["tokens injected by the top-3 memories (word pieces, header included)",
                 ", ".join(f"{f} {t[f]}" + (f" ({t[f + '_memories']} found)" if t[f + "_memories"] < 3 else "")
                           for f in ("insight", "workflow", "summary", "trajectory") if f in t),
                 "—", "—", f"insight ≤ 600: {_verdict(t.get('insight', 0) <= 600)}"])
    c = r["cold"]
    rows.append(["`mtl --help` cold start", f"{c['help_s']:.2f} s", f"python -c pass {c['python_pass_s']:.2f} s",
                 _x(c["help_s"], c["python_pass_s"]), f"≤ 0.5 s: {_verdict(c['help_s'] <= 0.5)}"])
    rows.append(["`import mtl_graph`", f"{c['import_s']:.2f} s", f"python -c pass {c['python_pass_s']:.2f} s",
                 _x(c["import_s"], c["python_pass_s"]), "—"])
    for kind, s in r["sandbox"].items():
        if "ms" not in s:
            rows.append([f"sandbox per command ({kind})", s["note"], "—", "—", "—"])
            continue
        ratio = s["ms"] / s["raw_ms"]
        target = f"≤ 1.2× and ≤ 5 ms: {_verdict(ratio <= 1.2 and s['ms'] <= 5)}"
        measured, baseline, ratios = f"{s['ms']:.1f} ms", f"{s['baseline']} {s['raw_ms']:.1f} ms", f"{ratio:.2f}×"
        if "bash_ms" in s:
            measured += f" (first command of a new sandbox {s['first_ms']:.1f} ms)"
            baseline += f"; bash -c true {s['bash_ms']:.1f} ms"
            ratios += f" / {_x(s['ms'], s['bash_ms'])} bash -c"
        rows.append([f"sandbox per command ({kind}, `true`)", measured, baseline, ratios, target])
    rss = r["pool"]["rss"]
    rows.append([f"peak RSS: {rss['size'] // 1000}k-memory pool opened + 100 searches (fresh process)",
                 f"{rss['pool']['rss_mb']:.0f} MB (open {rss['pool']['open_s']:.2f} s)",
                 f"model loaded, no pool {rss['model_only']['rss_mb']:.0f} MB",
                 _x(rss["pool"]["rss_mb"], rss["model_only"]["rss_mb"]),
                 f"< 1 GiB: {_verdict(rss['pool']['rss_mb'] < 1024)}"])
    bm25 = next(q for q in r["quality"] if q["model"] == "BM25 alone")
    for q in r["quality"]:
        if q is bm25:
            continue
        if "note" in q:
            rows.append([f"retrieval quality: {q['model']}", q["note"], "—", "—", "—"])
            continue
        ms = f", query {q['query_ms']:.2f} ms" if "query_ms" in q else ""
        rows.append([f"retrieval quality hit@3 / MRR: {q['model']}, {q['retrieval']}",
                     f"{q['hit@3']:.3f} / {q['mrr']:.3f}{ms}", f"BM25 alone {bm25['hit@3']:.3f} / {bm25['mrr']:.3f}",
                     _x(q["mrr"], bm25["mrr"]) + " MRR", "—"])
    return rows


def embed_figures(n: int) -> dict[str, float]:
    """The embedder alone: one new query at a time, and a batch of memory texts."""
    import numpy as np

    import corpus
    from mtl_graph.memory.engine.embeddings import local_embeddings

    emb = local_embeddings()
    texts = [q.text for q in corpus.queries(n, seed=99)]
    emb.embed_query("warm up")
    times = []
    for text in texts:
        t = time.perf_counter()
        emb.embed_query(text)
        times.append((time.perf_counter() - t) * 1000)
    docs = [m.key_text() for m in corpus.memories(max(200, n), offset=30_000_000)]
    t = time.perf_counter()
    emb.embed_array(docs)
    tokens = [len(e.ids) for e in emb._tokenizer.encode_batch(texts)]
    return {"query_p50_ms": float(np.percentile(times, 50)), "query_p95_ms": float(np.percentile(times, 95)),
            "query_tokens": float(np.median(tokens)), "batch_per_s": len(docs) / (time.perf_counter() - t)}


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def print_table(rows: list[list[str]], title: str) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover
        print(markdown(rows))
        return
    t = Table(title=title, show_lines=True)
    for h in HEADER:
        t.add_column(h, overflow="fold")
    for row in rows:
        t.add_row(*row)
    Console(width=220).print(t)


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes and few repetitions (about a minute)")
    ap.add_argument("--sizes", help="pool sizes, comma-separated (default 1000,10000,100000; quick: 1000)")
    ap.add_argument("--queries", type=int, help="queries per system and size (default 200; quick: 30)")
    ap.add_argument("--budget", type=float, default=20.0, help="seconds per system and size before stopping early")
    ap.add_argument("--real-max", type=int, default=10_000,
                    help="memories embedded with the real model; vectors beyond are drawn from them")
    ap.add_argument("--writes", type=int, help="new memories in the write test (default 500; quick: 100)")
    ap.add_argument("--single-adds", type=int, help="single add() calls in a row into the largest pool while it is "
                    "indexed in the background (default 8000; quick: 0 = skipped)")
    ap.add_argument("--graph-runs", type=int, help="interleaved rounds of the 20-step task (default 5; quick: 3)")
    ap.add_argument("--graph-pool", type=int, default=300, help="memories in the graph benchmark's pool")
    ap.add_argument("--sandbox", default="auto", help="sandbox for the task: auto (bwrap when usable), bwrap, local")
    ap.add_argument("--markdown", help="also write the table and the machine line to this Markdown file")
    ap.add_argument("--json", help="also write every raw figure to this JSON file")
    args = ap.parse_args(argv)
    quick = args.quick
    args.sizes = sorted(int(s) for s in (args.sizes or ("1000" if quick else "1000,10000,100000")).split(","))
    args.queries = args.queries or (30 if quick else 200)
    args.writes = args.writes if args.writes is not None else (100 if quick else 500)
    args.single_adds = args.single_adds if args.single_adds is not None else (0 if quick else 8000)
    args.graph_runs = args.graph_runs or (3 if quick else 5)
    if args.sandbox == "auto":
        from mtl_graph.sandbox.bwrap import BwrapSandbox

        args.sandbox = "bwrap" if BwrapSandbox.is_available() else "local"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    info = machine()
    start = time.perf_counter()
    results: dict[str, Any] = {"machine": info}
    step = lambda name: print(f"[{time.perf_counter() - start:5.0f} s] {name}", file=sys.stderr)  # noqa: E731
    step("cold starts")
    results["cold"] = bench_process.cold_start(3 if args.quick else 7)
    step("sandbox per command")  # before the pool benchmark makes this process large
    results["sandbox"] = bench_process.sandbox_costs(20 if args.quick else 100)
    step("embedder alone")
    results["embed"] = embed_figures(30 if args.quick else 100)
    step("retrieval quality per model")
    results["quality"] = quality.run()
    step("MTL graph vs the agent alone")
    results["graph"] = bench_graph.run(args)
    step("pool at each size")
    results["pool"] = bench_pool.run(args)
    step("online loop: lifecycle retrieval and credit")
    results["lifecycle"] = lifecycle.run([2000] if args.quick else [2000, 20000], 30 if args.quick else 100,
                                         30 if args.quick else 100)
    elapsed = time.perf_counter() - start
    end_load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    rows = table(results, args) + lifecycle.rows(results["lifecycle"])
    machine_line = (f"{info['cpus']} CPUs ({info['cpu']}), {info['ram']} RAM, Python {info['python']}, {info['os']}; "
                    f"{info['libraries']}; load average {info['load']} at start, {end_load} at end; "
                    f"run took {elapsed / 60:.1f} min")
    print()
    print_table(rows, "mtl_graph system benchmark (ratios against baselines measured in the same run)")
    print(f"\nmachine: {machine_line}")
    for target in (args.markdown, args.json):
        if target:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
    if args.markdown:
        Path(args.markdown).write_text(f"Machine: {machine_line}.\n\n{markdown(rows)}\n", encoding="utf-8")
    if args.json:
        results["pool"]["sizes"] = [asdict(s) for s in results["pool"]["sizes"]]
        Path(args.json).write_text(json.dumps(results, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
