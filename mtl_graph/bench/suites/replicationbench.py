"""ReplicationBench: numeric results of astrophysics papers to reproduce, from its dataset files.

Spec: ``replicationbench:PATH``, PATH the release checkout (``src/dataset/``) or that dataset directory: ``papers/
<paper>.json`` (metadata, datasets, execution requirements), ``tasks/<paper>/<task>.json`` (instructions,
``expected_output``, ``tolerance``) and ``manuscripts/masked/<paper>.txt`` (the paper with its results masked).
The predecessor layout of the same data (the benchmark's earlier "researchbench" checkout) loads too: ``papers/
<paper>.json`` with the masked texts in ``papers/masked_texts/<paper>.txt``, and ``tasks/`` and ``data/`` beside
``papers/``. Only numeric tasks are graded (a task of another ``kind``, a figure say, is skipped), as the
benchmark's own loader does.
Every task is one run: the agent gets the masked paper (``paper.txt``) and the paper's data, and writes
``submission.json`` ``{task_id: answer}``; the hidden check holds the answer against expected ± tolerance.

The data of most papers is downloaded (wget, an API, the Hugging Face Hub) and runs have no network, so a paper's
data is read from ``PATH/workspaces/<paper>/`` (where the benchmark's own setup puts it) or ``PATH/data/<paper>/``
(its ``local`` datasets); without it, or without a GPU a paper needs, or the Python packages it lists (PEP 508
lines, held against what the checks' interpreter has: hidden.python_reason), its tasks are skipped with the
reason.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

from mtl_graph.bench.suites.base import REFERENCE_KEY, SkippedTask, Suite, SuiteError, sample
from mtl_graph.bench.suites.hidden import TaskSkip, gpu_reason, packed_check, python_reason, script
from mtl_graph.core.task import Task

DOMAIN = "replicationbench"
PAPER_FILE = "paper.txt"
SUBMISSION_FILE = "submission.json"
CORE_SOURCE = "expert"
NUMERIC = "numeric"
_PAPER_KEYS = ("paper_id", "title")
_TASK_KEYS = ("task_id", "instructions", "expected_output", "tolerance")
_INSTRUCTION = """\
Reproduce a numerical result of the research paper "{title}" ({date}). Its full text, with the results masked, \
is in `{paper}`; compute the result with your own code, following the paper's methodology. Never copy values \
stated in the paper and never guess: an answer must come from your computation.

{data}{other}TASK {task_id}: {description}
{instructions}

Expected output: {shape}.

Write your answer to `{submission}` in the current directory as a JSON object: {{"{task_id}": ANSWER}}, with \
full-precision numbers; write null for ANSWER if you could not compute it.
"""


class Layout(NamedTuple):
    """Where one checkout keeps papers, tasks and masked texts."""

    papers: Path
    """The paper files (``<paper>.json``)."""
    tasks: Path
    """The task directories (``<paper>/<task>.json``)."""
    masked: Path
    """The masked texts (``<paper>.txt``)."""
    root: Path
    """The checkout, for each paper's data (``workspaces/<paper>/`` or ``data/<paper>/``) and for messages."""


def layout_of(root: Path) -> Layout:
    """The layout of a checkout: the release's (``src/dataset`` or the dataset directory itself) or its
    predecessor's (``papers/masked_texts``); SuiteError for neither."""
    dataset = root / "src" / "dataset" if (root / "src" / "dataset").is_dir() else root
    if not (dataset / "papers").is_dir():
        raise SuiteError(f"{root}: not a ReplicationBench dataset (no papers/ or src/dataset/papers/)")
    if not (dataset / "manuscripts").is_dir() and (dataset / "papers" / "masked_texts").is_dir():
        return Layout(dataset / "papers", dataset / "tasks", dataset / "papers" / "masked_texts", root)
    return Layout(dataset / "papers", dataset / "tasks", dataset / "manuscripts" / "masked", root)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskSkip(f"cannot read {path.name} ({exc})") from None
    except json.JSONDecodeError as exc:
        raise TaskSkip(f"{path.name} is not valid JSON ({exc.msg} at line {exc.lineno})") from None


def _shape(expected: Any) -> str:
    if isinstance(expected, list):
        return f"a list of {len(expected)} numbers"
    if isinstance(expected, dict):
        return f"an object with the keys {', '.join(map(str, expected))}"
    return "a single number" if isinstance(expected, (int, float)) else "as the instructions say"


def _datasets(paper: dict) -> list[dict]:
    value = paper.get("dataset") or []
    return [d for d in (value if isinstance(value, list) else [value]) if isinstance(d, dict)]


def _data_text(datasets: list[dict]) -> str:
    lines = []
    for d in datasets:
        if d.get("kind") == "none":
            continue
        notes = "; ".join(f"{k}: {v}" for k, v in (d.get("data_instructions") or {}).items())
        lines.append(f"Dataset {d.get('dataset_name', '?')} (already in the current directory): {notes}")
    return "\n".join(lines) + "\n\n" if lines else ""


def paper_environment(paper: dict, root: Path) -> tuple[Path | None, str | None]:
    """(the directory holding the paper's data, None) or (None, why its tasks cannot run here)."""
    pid = str(paper["paper_id"])
    reqs = paper.get("execution_requirements") or {}
    if reqs.get("needs_gpu") and (reason := gpu_reason()):
        return None, reason
    deps = reqs.get("dependencies") or []
    if reason := python_reason([str(d) for d in (deps if isinstance(deps, list) else [deps])],
                               f"the dependencies of {pid}"):
        return None, reason
    for candidate in (root / "workspaces" / pid, root / "data" / pid):
        if candidate.is_dir():
            return candidate, None
    remote = [d for d in _datasets(paper) if d.get("kind") not in ("none", None)]
    if not remote:
        return None, None
    kinds = ", ".join(sorted({str(d.get("kind")) for d in remote}))
    return None, (f"its data ({kinds}) is not here and runs have no network: put it in "
                  f"{root / 'workspaces' / pid}/")


def task_of(paper: dict, path: Path, text: str, data: Path | None) -> Task:
    """The task of one task file; TaskSkip for a malformed one."""
    item = _json(path)
    if not isinstance(item, dict) or (missing := [k for k in _TASK_KEYS if k not in item]):
        raise TaskSkip(f"{path.name} lacks {', '.join(missing) if isinstance(item, dict) else 'a JSON object'}")
    if item.get("kind", NUMERIC) != NUMERIC:
        raise TaskSkip(f"kind {item['kind']!r}: only {NUMERIC} tasks are graded, as the benchmark's own loader does")
    tid, expected = str(item["task_id"]), item["expected_output"]
    steps = item["instructions"] if isinstance(item["instructions"], list) else [item["instructions"]]
    other = str(paper.get("other_instructions") or "").strip()
    instruction = _INSTRUCTION.format(
        title=paper["title"], date=paper.get("publication_date", "undated"), paper=PAPER_FILE,
        data=_data_text(_datasets(paper)), other=f"{other}\n\n" if other else "", task_id=tid,
        description=item.get("description", ""), instructions="\n".join(str(s) for s in steps),
        shape=_shape(expected), submission=SUBMISSION_FILE)
    payload = {"expected": expected, "tolerance": item["tolerance"]}
    return Task(
        id=f"{DOMAIN}/{paper['paper_id']}/{tid}",
        instruction=instruction,
        domain=DOMAIN,
        files={PAPER_FILE: text},
        source_dir=data,
        **packed_check(script("replicationbench.py"), payload, f"main({tid!r}, PAYLOAD)").task_fields(),
        solution_files=[SUBMISSION_FILE],
        check_timeout=60.0,
        metadata={"suite": DOMAIN, "paper": paper["paper_id"], "difficulty": item.get("difficulty"),
                  "parents": item.get("parents") or [],
                  # The expected answer, for the oracle runner that checks the harness itself.
                  REFERENCE_KEY: {SUBMISSION_FILE: json.dumps({tid: expected})}},
    )


def _paper_tasks(paper_file: Path, layout: Layout) -> tuple[list[Path], list[Task], list[SkippedTask]]:
    pid = paper_file.stem
    files = sorted((layout.tasks / pid).glob("*.json"))
    skip = [SkippedTask(id=f"{DOMAIN}/{pid}/{f.stem}", reason="") for f in files] or [
        SkippedTask(id=f"{DOMAIN}/{pid}", reason="")]

    def all_skipped(reason: str) -> tuple[list[Path], list[Task], list[SkippedTask]]:
        return files, [], [s.model_copy(update={"reason": reason}) for s in skip]

    try:
        paper = _json(paper_file)
    except TaskSkip as exc:
        return all_skipped(str(exc))
    if not isinstance(paper, dict) or any(not paper.get(k) for k in _PAPER_KEYS):
        return all_skipped(f"{paper_file.name} lacks {' or '.join(_PAPER_KEYS)}")
    if not files:
        return all_skipped(f"no {layout.tasks.name}/{pid}/*.json")
    if paper.get("source", CORE_SOURCE) != CORE_SOURCE:
        return all_skipped(f"source {paper.get('source')!r}: the benchmark is the {CORE_SOURCE}-written papers")
    masked = layout.masked / f"{pid}.txt"
    if not masked.is_file():
        shown = masked.relative_to(layout.papers.parent)
        return all_skipped(f"no {shown} (the unmasked text states the answers)")
    data, reason = paper_environment(paper, layout.root)
    if reason:
        return all_skipped(reason)
    text = masked.read_text(encoding="utf-8", errors="replace")
    tasks, skipped = [], []
    for f in files:
        try:
            tasks.append(task_of(paper, f, text, data))
        except TaskSkip as exc:
            skipped.append(SkippedTask(id=f"{DOMAIN}/{pid}/{f.stem}", reason=str(exc)))
    return files, tasks, skipped


def load(arg: str | None, limit: int | None, seed: int) -> Suite:
    """``replicationbench:PATH``: the release checkout, its ``src/dataset`` directory, or the predecessor's
    checkout."""
    if not arg:
        raise SuiteError("suite 'replicationbench' needs a path: replicationbench:PATH (the release checkout)")
    layout = layout_of(Path(arg).expanduser())
    papers = sorted(layout.papers.glob("*.json"))
    if not papers:
        raise SuiteError(f"{layout.papers}: no paper files (*.json)")
    tasks, skipped, total = [], [], 0
    for paper_file in papers:
        files, ok, bad = _paper_tasks(paper_file, layout)
        total += max(len(files), 1)
        tasks += ok
        skipped += bad
    return Suite(spec=f"replicationbench:{arg}", name=DOMAIN, tasks=sample(tasks, limit, seed), skipped=skipped,
                 total=total)
