"""report.md, report.json and PNG plots from a results directory."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from mtl_graph.bench.records import ZERO_SHOT, EvalConfig, Pool, TaskResult
from mtl_graph.bench.passk import aggregate, error_counts, is_error, task_scores
from mtl_graph.bench.results import SUITES_FILE, ResultStore

MD_LIST_CAP = 100


def _transfer(results: list[TaskResult], k: int) -> tuple[list[dict], list[dict]]:
    """Negative: solved zero-shot (any attempt), never with memories. Positive: the reverse."""
    retrieved: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for r in results:
        ids = retrieved[(r.suite, r.task_id, r.condition.key)]
        ids += [m.id for m in r.retrieved if m.id not in ids]
    scores = task_scores(results, k)
    zero = {(s.suite, s.task_id): s for s in scores if s.condition == ZERO_SHOT}
    negative, positive = [], []
    for s in scores:
        base = zero.get((s.suite, s.task_id))
        if s.condition == ZERO_SHOT or base is None or not base.n or not s.n:  # errors only: nothing to compare
            continue
        row = {"suite": s.suite, "task_id": s.task_id, "condition": s.condition,
               "zero_shot": f"{base.c}/{base.n}", "with_memory": f"{s.c}/{s.n}",
               "retrieved": retrieved[(s.suite, s.task_id, s.condition)]}
        if base.c > 0 and s.c == 0:
            negative.append(row)
        elif base.c == 0 and s.c > 0:
            positive.append(row)
    return negative, positive


def _judge(results: list[TaskResult]) -> dict[str, Any]:
    """How often the LLM judge agreed with the tests, on runs where both decided."""
    pairs = [(r.verdict.status, r.judge_verdict.status) for r in results
             if r.verdict and r.verdict.source == "tests" and r.judge_verdict]
    agree = sum(t == j for t, j in pairs)
    return {"compared": len(pairs), "agree": agree, "accuracy": agree / len(pairs) if pairs else None,
            "false_pass": sum(t != "pass" and j == "pass" for t, j in pairs),
            "false_fail": sum(t == "pass" and j != "pass" for t, j in pairs)}


def _tampered(results: list[TaskResult]) -> list[dict[str, Any]]:
    """Runs whose agent changed the task's test files (the check used the pristine copies, so the verdict stands)."""
    return [{"suite": r.suite, "task_id": r.task_id, "condition": r.condition.key, "attempt": r.attempt,
             "verdict": r.verdict.status.value, "files": r.verdict.tests_modified, "dropped": r.verdict.dropped}
            for r in results if r.verdict is not None and r.verdict.tests_modified]


def _dropped(results: list[TaskResult]) -> list[dict[str, Any]]:
    """Runs that left files the check did not see (not the solution: runner configuration, planted modules...)."""
    return [{"suite": r.suite, "task_id": r.task_id, "condition": r.condition.key, "attempt": r.attempt,
             "verdict": r.verdict.status.value, "dropped": r.verdict.dropped}
            for r in results if r.verdict is not None and r.verdict.dropped]


def _suspect(results: list[TaskResult]) -> list[dict[str, Any]]:
    """Runs whose solution reached into the test run, or whose tests did not all report: failed, never credited."""
    return [{"suite": r.suite, "task_id": r.task_id, "condition": r.condition.key, "attempt": r.attempt,
             "suspicions": r.verdict.suspicions, "dropped": r.verdict.dropped}
            for r in results if r.verdict is not None and r.verdict.suspicions]


def _suspect_by_task(results: list[TaskResult]) -> list[dict[str, Any]]:
    """Per task with any suspect run: how many of its runs were suspect, and what was found (file and rule), so a
    finding every run of a task shares (a false positive of the scan) stands out."""
    runs: dict[tuple[str, str], int] = defaultdict(int)
    flagged: dict[tuple[str, str], list[TaskResult]] = defaultdict(list)
    for r in results:
        runs[(r.suite, r.task_id)] += 1
        if r.verdict is not None and r.verdict.suspicions:
            flagged[(r.suite, r.task_id)].append(r)
    out = []
    for (suite, task_id), bad in sorted(flagged.items()):
        findings = list(dict.fromkeys(f for r in bad for f in r.verdict.suspicions))
        out.append({"suite": suite, "task_id": task_id, "suspect_runs": len(bad), "runs": runs[(suite, task_id)],
                    "findings": findings[:10], "more_findings": max(0, len(findings) - 10)})
    return out


def _accounting(results: list[TaskResult]) -> dict[str, dict[str, float]]:
    """Per condition: runs, errors, the agent's tokens, cost, time, and the memory method's extra model calls,
    tokens and memory tool calls (every stage of the run's cost but the agent's own)."""
    from mtl_graph.core.cost import extra

    acc: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in results:
        row = acc[r.condition.key]
        row["runs"] += 1
        row["errors"] += is_error(r)
        row["input_tokens"] += r.tokens.input
        row["output_tokens"] += r.tokens.output
        row["cost_usd"] += r.cost_usd or 0.0
        row["duration_s"] += r.duration_s
        for key, value in extra(r.stage_cost).items():
            row[f"extra_{key}"] += value
    return {c: dict(v) for c, v in acc.items()}


def _group_columns(results: list[TaskResult], suites: list[str], suites_info: list[dict],
                   k: int) -> tuple[list[str], dict]:
    """One extra column per group of a suite (an exercism language), placed after its suite; not averaged."""
    groups = {s["name"]: s.get("groups") or {} for s in suites_info}
    grouped = [r.model_copy(update={"suite": f"{r.suite}/{groups[r.suite][r.task_id]}"}) for r in results
               if r.task_id in groups.get(r.suite, {})]
    scores = {key: s for key, s in aggregate(grouped, k).items() if key[0] != "average"}
    columns = []
    for suite in suites:
        columns += [suite] + sorted({c for c, _ in scores if c.startswith(f"{suite}/")})
    return columns, scores


def _retrieval(results: list[TaskResult], config: EvalConfig, pool: Pool | None) -> dict[str, dict]:
    """Per memory condition: memories of its format in the pool, runs, runs that retrieved any, memories."""
    out: dict[str, dict] = {}
    for cond in config.conditions()[1:]:
        runs = [r for r in results if r.condition.key == cond.key]
        fmt = cond.memory_format.value if cond.memory_format else None
        out[cond.key] = {"pool_memories": None if pool is None else sum(m.type.value == fmt for m in pool.memories),
                         "runs": len(runs), "runs_with_memories": sum(bool(r.retrieved) for r in runs),
                         "retrieved": sum(len(r.retrieved) for r in runs)}
    return out


def build_report(results: list[TaskResult], config: EvalConfig, suites_info: list[dict] | None = None,
                 pool: Pool | None = None) -> dict:
    """All numbers of the report as plain data (what report.json holds)."""
    k = config.k
    scores = aggregate(results, k)
    errored = error_counts(results)
    conditions = [c.key for c in config.conditions()
                  if any(s.condition == c.key for s in scores.values()) or ("average", c.key) in errored]
    order = [s["name"] for s in suites_info or []]
    suites = sorted({r.suite for r in results}, key=lambda n: (order.index(n) if n in order else len(order), n))
    columns, group_scores = _group_columns(results, suites, suites_info or [], k)
    scores.update(group_scores)
    retrieval = _retrieval(results, config, pool)
    table: dict[str, dict[str, dict]] = {}
    for cond in conditions:
        table[cond] = {}
        no_memories = retrieval.get(cond, {}).get("pool_memories") == 0
        for suite in columns + ["average"]:
            cell, base = scores.get((suite, cond)), scores.get((suite, ZERO_SHOT))
            if cell:
                delta = None if base is None or cond == ZERO_SHOT else cell.pass_at_k - base.pass_at_k
                table[cond][suite] = {**cell.model_dump(exclude={"suite", "condition", "k"}), "delta": delta,
                                      "no_memories": no_memories}
    avg = {c: table[c]["average"]["pass_at_k"] for c in table if "average" in table[c]}
    by_key = {c.key: c for c in config.conditions()}
    pool_curves: dict[str, list] = defaultdict(list)
    domain_curves: dict[str, list] = defaultdict(list)
    for key, value in avg.items():
        cond = by_key[key]
        if cond.memory_format is None:
            continue
        fmt = cond.memory_format.value
        if not cond.source_domains:
            pool_curves[fmt].append([cond.pool_fraction, value])
        if cond.source_domains and cond.pool_fraction == 1.0:
            domain_curves[fmt].append([cond.source_domains, value])
    negative, positive = _transfer(results, k)
    return {
        "config": config.model_dump(mode="json"),
        "k": k,
        "suites": suites,
        "columns": columns,
        "conditions": conditions,
        "formats": [f.value for f in config.formats if f.value in table],
        "table": table,
        "scaling": {"pool_fraction": {f: sorted(p) for f, p in pool_curves.items() if len(p) > 1},
                    "source_domains": {f: sorted(p) for f, p in domain_curves.items()}},
        "negative_transfer": negative,
        "positive_transfer": positive,
        "judge": _judge(results),
        "accounting": _accounting(results),
        "leaks": [{"task_id": r.task_id, "condition": r.condition.key, "attempt": r.attempt,
                   "memory_ids": r.leaked_memory_ids} for r in results if r.leaked_memory_ids],
        "errors": [{"suite": r.suite, "task_id": r.task_id, "condition": r.condition.key, "attempt": r.attempt,
                    "error": r.error or (r.verdict.reason if r.verdict else "")} for r in results if is_error(r)],
        "error_counts": {c: {s: n for (s, cc), n in errored.items() if cc == c} for c in conditions},
        "tests_modified": _tampered(results),
        "suspect": _suspect(results),
        "suspect_by_task": _suspect_by_task(results),
        "dropped": _dropped(results),
        "suites_info": suites_info or [],
        "pool": None if pool is None else {"memories": len(pool.memories), "note": pool.note},
        "retrieval": retrieval,
    }


def _cell(c: dict | None, errors: int = 0) -> str:
    errs = f" [{errors} err]" if errors else ""
    if not c:
        return "–" + errs
    if c.get("no_memories"):
        return "no memories" + errs
    delta = "" if c["delta"] is None else f" ({c['delta']:+.3f})"
    return f"{c['pass_at_k']:.3f}{delta}" + ("*" if c["incomplete"] else "") + errs


def _rows(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]


def _transfer_md(title: str, rows: list[dict]) -> list[str]:
    lines = [f"## {title} ({len(rows)})", ""]
    if not rows:
        return lines + ["None.", ""]
    body = [[r["suite"], r["task_id"], r["condition"], r["zero_shot"], r["with_memory"],
             ", ".join(r["retrieved"]) or "–"] for r in rows[:MD_LIST_CAP]]
    lines += _rows(["suite", "task", "condition", "zero-shot", "with memory", "retrieved memories"], body)
    if len(rows) > MD_LIST_CAP:
        lines.append(f"\n… {len(rows) - MD_LIST_CAP} more in report.json")
    return lines + [""]


def _problem_runs_md(data: dict) -> list[str]:
    """The runs whose agent modified the tests, and the runs that ended in an error (each listed, capped)."""
    tampered = data.get("tests_modified", [])
    lines = [f"## Tests modified by the agent ({len(tampered)})", ""]
    lines += ["No run changed the task's test files.", ""] if not tampered else _rows(
        ["suite", "task", "condition", "attempt", "verdict", "files (the check used the pristine copies)"],
        [[t["suite"], t["task_id"], t["condition"], t["attempt"], t["verdict"], ", ".join(t["files"])]
         for t in tampered[:MD_LIST_CAP]]) + [""]
    suspect = data.get("suspect", [])
    lines += [f"## Suspect runs ({len(suspect)})", ""]
    lines += ["No run's solution reached into its test run.", ""] if not suspect else _rows(
        ["suite", "task", "condition", "attempt", "why (scored as a fail)"],
        [[s["suite"], s["task_id"], s["condition"], s["attempt"], _one_line("; ".join(s["suspicions"]))]
         for s in suspect[:MD_LIST_CAP]]) + [""]
    by_task = data.get("suspect_by_task", [])
    if by_task:
        lines += [f"### Suspect runs by task ({len(by_task)} tasks)", ""]
        lines += _rows(["suite", "task", "suspect runs", "what was found (file, rule)"],
                       [[t["suite"], t["task_id"], f"{t['suspect_runs']} / {t['runs']}",
                         _one_line("; ".join(t["findings"]))] for t in by_task[:MD_LIST_CAP]]) + [""]
    dropped = data.get("dropped", [])
    lines += [f"## Files not carried into the check ({len(dropped)} runs)", ""]
    lines += ["Every run's check saw all the files its agent wrote.", ""] if not dropped else _rows(
        ["suite", "task", "condition", "attempt", "verdict", "not carried (why)"],
        [[d["suite"], d["task_id"], d["condition"], d["attempt"], d["verdict"], _one_line(", ".join(d["dropped"]))]
         for d in dropped[:MD_LIST_CAP]]) + [""]
    lines += [f"## Errors ({len(data['errors'])})", ""]
    lines += ["No run ended in an error.", ""] if not data["errors"] else _rows(
        ["suite", "task", "condition", "attempt", "error"],
        [[e.get("suite", ""), e["task_id"], e["condition"], e["attempt"], _one_line(e["error"])]
         for e in data["errors"][:MD_LIST_CAP]]) + [""]
    if max(len(tampered), len(suspect), len(dropped), len(data["errors"])) > MD_LIST_CAP:
        lines += ["… more in report.json", ""]
    return lines


def _one_line(text: str, width: int = 160) -> str:
    line = " ".join(text.split()).replace("|", "\\|")
    return line if len(line) <= width else line[: width - 1] + "…"


def _provenance_md(data: dict) -> list[str]:
    """Hold-one-out is claimed only when phase 3 retrieved memories; an empty pool or phase 3 is said so."""
    lines = ["## Provenance", ""]
    retrieval, pool, cfg = data.get("retrieval", {}), data.get("pool"), data["config"]
    retrieved = sum(r["retrieved"] for r in retrieval.values())
    if data["leaks"]:
        lines.append(f"**{len(data['leaks'])} runs retrieved memories outside their scope** — "
                     "see report.json `leaks`.")
    elif not retrieval or not any(r["runs"] for r in retrieval.values()):
        lines.append("Phase 3 did not run, so no memory was retrieved and hold-one-out was not exercised.")
    elif pool is not None and not pool["memories"]:
        why = f" ({pool['note']})" if pool["note"] else ""
        who = f"with the offline agent `{cfg['runner']}` " if not cfg["model"] else ""
        lines.append(f"Phase 3 ran {who}with an empty pool{why}: nothing was retrieved, so hold-one-out was "
                     "not exercised.")
    elif not retrieved:
        lines.append("Phase 3 retrieved no memory, so hold-one-out was not exercised.")
    else:
        lines.append(f"No run retrieved a memory outside its scope (hold-one-out holds over {retrieved} "
                     "retrieved memories).")
    if cfg["holdout"] and len(data["suites"]) == 1 and retrieval and not retrieved and pool and pool["memories"]:
        lines.append(f"\n**Warning:** hold-one-out with a single suite (`{data['suites'][0]}`): every memory "
                     "comes from the task's own domain, so none can be retrieved. Add a suite from another "
                     "domain, or use --no-holdout.")
    if retrieval:
        lines += ["", "| condition | pool memories of its format | runs | runs with memories | memories retrieved |",
                  "|---|---|---|---|---|"]
        lines += [f"| {c} | {'–' if r['pool_memories'] is None else r['pool_memories']} | {r['runs']} | "
                  f"{r['runs_with_memories']} | {r['retrieved']} |" for c, r in retrieval.items()]
    return lines + [""]


def _per_run(a: dict[str, float]) -> list[str]:
    """The extra cost columns of one condition's accounting row, per run (reports written before: zeros)."""
    runs = a["runs"] or 1
    per = {key: a.get(f"extra_{key}", 0.0) / runs
           for key in ("calls", "input_tokens", "output_tokens", "memory_tool_calls")}
    return [f"{round(per['calls'], 2):g}", f"{per['input_tokens']:.0f} / {per['output_tokens']:.0f}",
            f"{round(per['memory_tool_calls'], 2):g}"]


def render_markdown(data: dict, plots: list[str]) -> str:
    k, cfg = data["k"], data["config"]
    lines = ["# Memory transfer evaluation", "",
             f"Runner `{cfg['runner']}`" + (f", model `{cfg['model']}`" if cfg["model"] else "")
             + f"; pass@{k} from {cfg['samples'] or k} attempt(s) per task; seed {cfg['seed']}"
             + (f"; {cfg['limit']} tasks per suite" if cfg["limit"] else "") + ".", "",
             f"## Pass@{k} by suite and condition (Δ vs zero-shot; hold-one-out)", ""]
    columns = data.get("columns", data["suites"])
    header = ["condition"] + columns + ["avg"]
    errs = data.get("error_counts", {})
    lines += _rows(header, [[c] + [_cell(data["table"][c].get(s), errs.get(c, {}).get(s, 0))
                                   for s in columns + ["average"]] for c in data["conditions"]])
    if data["errors"]:
        lines.append(f"\nPass@{k} is over completed runs; [n err] counts runs that ended in an infrastructure error "
                     "(model provider, sandbox, pool): not failed attempts, retried on the next invocation.")
    if any(cell["incomplete"] for row in data["table"].values() for cell in row.values()):
        lines.append("\n\\* some tasks have fewer than k attempts (scored with k = attempts).")
    for name, curves in data["scaling"].items():
        if curves:
            lines += ["", f"## Scaling by {name.replace('_', ' ')}", ""]
            lines += _rows(["format", "points (x → avg pass@k)"],
                           [[f, ", ".join(f"{x:g} → {y:.3f}" for x, y in pts)] for f, pts in curves.items()])
    lines += [""] + _transfer_md("Negative transfer: solved zero-shot, failed with memories", data["negative_transfer"])
    lines += _transfer_md("Positive transfer: failed zero-shot, solved with memories", data["positive_transfer"])
    j = data["judge"]
    lines += ["## LLM judge vs tests", "",
              "No run has both a test verdict and a judge verdict." if not j["compared"] else
              f"Accuracy {j['accuracy']:.3f} on {j['compared']} runs ({j['false_pass']} false passes, "
              f"{j['false_fail']} false fails).", ""]
    lines += _provenance_md(data)
    lines += _problem_runs_md(data)
    lines += ["## Runs, tokens and cost", "",
              "Beside each condition's average pass@k: the agent's tokens, and per run the memory method's extra "
              "model calls and tokens (plan, judge, distill) and memory tool calls.", ""]
    avg = {c: row.get("average", {}).get("pass_at_k") for c, row in data["table"].items()}
    lines += _rows(["condition", f"avg pass@{k}", "runs", "errors", "input tokens", "output tokens", "cost (USD)",
                    "extra calls per run", "extra tokens per run (in / out)", "memory tool calls per run"],
                   [[c, "–" if avg.get(c) is None else f"{avg[c]:.3f}", int(a["runs"]), int(a["errors"]),
                     int(a["input_tokens"]), int(a["output_tokens"]), f"{a['cost_usd']:.4f}",
                     *_per_run(a)] for c, a in data["accounting"].items()])
    skipped = [(s["spec"], s["skip_reason"]) for s in data["suites_info"] if s.get("skip_reason")]
    skipped += [(t["id"], t["reason"]) for s in data["suites_info"] for t in s.get("skipped", [])]
    if skipped:
        lines += ["", "## Skipped", ""] + [f"- `{what}`: {why}" for what, why in skipped]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{Path(p).stem}]({Path(p).name})" for p in plots]
    return "\n".join(lines) + "\n"


def render_report(out: str | Path) -> dict[str, Path]:
    """(Re)render report.md, report.json and the plots of a results directory; returns their paths."""
    store = ResultStore(out)
    root = store.root
    results = store.results()
    info_path = root / SUITES_FILE
    suites_info = json.loads(info_path.read_text(encoding="utf-8")) if info_path.exists() else []
    data = build_report(results, store.config, suites_info, store.load_pool())
    from mtl_graph.bench import plots

    paths: dict[str, Path] = {}
    if data["table"]:
        paths["formats_png"] = plots.format_comparison(data, root / "formats.png")
    base = data["table"].get(ZERO_SHOT, {}).get("average", {}).get("pass_at_k")
    for name, label in (("pool_fraction", "fraction of the pool"), ("source_domains", "number of source domains")):
        if data["scaling"][name]:
            paths[f"scaling_{name}_png"] = plots.scaling_curve(
                data["scaling"][name], base, label, f"Scaling: {label}", data["k"], root / f"scaling_{name}.png")
    data["plots"] = [p.name for p in paths.values()]
    paths["json"] = store.write_json("report.json", data)
    md = root / "report.md"
    md.write_text(render_markdown(data, data["plots"]), encoding="utf-8")
    paths["md"] = md
    return paths
