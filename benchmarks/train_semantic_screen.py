"""Train the semantic screen and measure it: writes mtl_graph/memory/screening/semantic_weights.json.

    python benchmarks/train_semantic_screen.py            # train, report, write the weights
    python benchmarks/train_semantic_screen.py --check    # train again and compare with the shipped file
    python benchmarks/train_semantic_screen.py --report   # measure only, write nothing
    python benchmarks/train_semantic_screen.py --runs DIR [DIR ...] --cache vectors.npz  # with public runs

The corpus is the project's own, all generated or written in this repository:
- hostile: the generated hostile corpus's plain texts in every language (tests/helpers/screen_corpus.py), one
  label per screening family, and the generated grammar of intents x verbs x objects x framings
  (tests/helpers/screen_grammar.py);
- benign: the benign advice (tests/helpers/screen_benign.py), generated command lines and comments
  (tests/helpers/screen_commands.py) and the commands of the fixture agent logs (tests/fixtures/logs,
  tests/fixtures/agent_logs; not agent_logs/screening, which the tests keep unseen).
Each text is cut into the segments the screen reads (semantic.segments_of_text) and embedded with the bundled
MiniLM model. Training is deterministic (semantic.fit: damped Newton steps from zero); the
threshold is a high quantile of the out-of-fold benign scores (5 folds by position; BENIGN_QUANTILE).

With --runs (local copies of public agent runs, read as `mtl ingest` reads them; never part of the repository),
each run becomes the trajectory memory ingest makes and its advice sentences (semantic.segments) are split by
run: the runs of the agent with the most runs, sorted by file name, go by position a quarter each to hard
negatives (folds 0 and 1: benign training rows), calibration (fold 2: the lowest threshold flagging at most
RUN_FALSE_ALARMS of these runs, reported with the held-out recall it leaves; the shipped threshold stays the
benign quantile) and test (fold 3); the other agents' runs are never trained on and measure false alarms on
agents the screen has not seen. The weights then depend on those runs (their digest is in
the corpus hash); --cache keeps the embeddings of every text between invocations (they are deterministic).
Then it reports:
- leave-one-family-out: trained without one hostile family, the recall on that family at the same threshold;
- the held-out batches written before training (tests/helpers/screen_heldout.py and, written before the grammar
  and the hard negatives were added, screen_heldout2.py): recall and precision per family, false alarms on the
  held-out benign notes, and the rules' recall on the same texts beside it;
- with --runs: the share of test runs flagged per agent, at the shipped and at the calibrated threshold.
False alarms of the shipped screen and the rules on real agent runs: benchmarks/screening_real_runs.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.screen_benign import benign_texts  # noqa: E402
from helpers.screen_commands import benign_command_lines  # noqa: E402
from helpers.screen_corpus import hostile_cases  # noqa: E402
from helpers.screen_grammar import generated_hostile  # noqa: E402
from helpers.screen_heldout import BENIGN as HELDOUT_BENIGN, HOSTILE as HELDOUT_HOSTILE  # noqa: E402
from helpers.screen_heldout2 import BENIGN as HELDOUT2_BENIGN, HOSTILE as HELDOUT2_HOSTILE  # noqa: E402
from screening_real_runs import memories_of  # noqa: E402

from mtl_graph.importers import load_many  # noqa: E402
from mtl_graph.memory.engine.embeddings import LOCAL_MODEL_NAME, local_embeddings  # noqa: E402
from mtl_graph.memory.screening.screen import screen_text  # noqa: E402
from mtl_graph.memory.screening.semantic import (WEIGHTS_FILE, SemanticScreen, corpus_digest, fit,  # noqa: E402
                                                 load, segments, segments_of_text)

FOLDS = 5
FIXTURE_LOGS = [ROOT / "tests" / "fixtures" / "logs", *(p for p in (ROOT / "tests" / "fixtures" / "agent_logs").iterdir()
                                                        if p.name != "screening")]


def docs_text() -> list[str]:
    """The project's own documentation (not the security page, which quotes attacks, nor the benchmarks page,
    which reports this training's own numbers: writing them there must not change the next training): engineering
    prose about tests, settings, keys and downloads, none of it an instruction to misbehave."""
    return [path.read_text(encoding="utf-8") for path in sorted((ROOT / "docs").glob("*.md"))
            if path.name not in ("security.md", "benchmarks.md")] + [(ROOT / "README.md").read_text(encoding="utf-8")]


def corpus() -> list[tuple[str, int, str]]:
    """(segment, label, family) once each, hostile first; the family of a benign segment is its source."""
    rows: dict[str, tuple[int, str]] = {}
    for case in hostile_cases():
        if case.how.endswith("/plain"):
            for segment in segments_of_text(case.text):
                rows.setdefault(segment, (1, case.family))
    for family, texts in generated_hostile().items():
        for text in texts:
            for segment in segments_of_text(text):
                rows.setdefault(segment, (1, family))
    loaded, _ = load_many(sorted(FIXTURE_LOGS))
    runs = [step.action for run in loaded for step in run.trajectory.steps]
    for source, texts in (("advice", benign_texts()), ("commands", benign_command_lines()), ("fixture runs", runs),
                          ("docs", docs_text())):
        for text in texts:
            for segment in segments_of_text(text):
                rows.setdefault(segment, (0, source))
    return [(text, label, family) for text, (label, family) in rows.items()]


@dataclass
class Runs:
    """The advice segments of public runs, split by run (see the module's docstring)."""

    hard_negatives: list[str]
    """Segments of the training agent's folds 0 and 1 (at most HARD_NEGATIVES): benign training rows."""
    calibration: list[list[str]]
    """Each fold-2 run's segments: the threshold keeps their false alarms at RUN_FALSE_ALARMS or under."""
    test: dict[str, list[list[str]]]
    """Per agent (the training agent's fold 3, every other agent whole), each run's segments."""
    digest: str
    """A hash of every segment of every run, in order: part of the corpus hash."""


RUN_FOLDS = 4
HARD_NEGATIVES = 4000
"""At most this many run segments join the benign training rows (every n-th of folds 0 and 1)."""
RUN_FALSE_ALARMS = 0.005
"""The share of calibration runs the threshold may flag (half the target of 1%, so the unseen runs keep a margin)."""


def public_runs(paths: list[Path]) -> Runs:
    by_agent: dict[str, list[tuple[str, list[str]]]] = {}
    for fmt, name, memory in memories_of(paths):
        by_agent.setdefault(fmt, []).append((name, segments(memory)))
    if not by_agent:
        raise SystemExit(f"no runs found under {', '.join(map(str, paths))}")
    train_agent = max(sorted(by_agent), key=lambda agent: len(by_agent[agent]))
    own = [found for _, found in sorted(by_agent[train_agent])]
    fold = [i % RUN_FOLDS for i in range(len(own))]
    hard = list(dict.fromkeys(s for found, k in zip(own, fold) if k in (0, 1) for s in found))
    hard = hard[::-(-len(hard) // HARD_NEGATIVES)]  # evenly spaced, so training stays a few minutes
    test = {f"{train_agent} (fold 3)": [found for found, k in zip(own, fold) if k == 3]}
    test |= {agent: [found for _, found in sorted(runs)] for agent, runs in sorted(by_agent.items())
             if agent != train_agent}
    digest = corpus_digest((s, 0) for agent in sorted(by_agent) for _, found in sorted(by_agent[agent]) for s in found)
    return Runs(hard, [found for found, k in zip(own, fold) if k == 2], test, digest)


class Embedder:
    """The bundled model's embeddings, kept in a .npz file between invocations when one is named."""

    def __init__(self, cache: Path | None):
        self.cache = cache
        self.known: dict[str, np.ndarray] = {}
        if cache is not None and cache.is_file():
            with np.load(cache, allow_pickle=False) as data:
                self.known = dict(zip(data["texts"].tolist(), data["vectors"]))

    def __call__(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        if missing:
            vectors = np.asarray(local_embeddings().embed_documents(missing), dtype=np.float32)
            self.known.update(zip(missing, vectors))
            if self.cache is not None:
                np.savez(self.cache, texts=np.array(list(self.known)), vectors=np.stack(list(self.known.values())))
        return np.asarray([self.known[t] for t in texts], dtype=np.float64).reshape(len(texts), -1)


embed = Embedder(None)


def out_of_fold(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    scores = np.zeros(len(y))
    fold = np.arange(len(y)) % FOLDS
    for k in range(FOLDS):
        w, b = fit(x[fold != k], y[fold != k])
        scores[fold == k] = SemanticScreen(w, b, 0.5, LOCAL_MODEL_NAME).scores(x[fold == k])
    return scores


BENIGN_QUANTILE = 0.99
"""The threshold: this quantile of the out-of-fold benign scores (a benign training segment scored by a model that
did not see it reaches it one time in a hundred; a real run's commands, farther from the hostile texts, less)."""


def train(rows: list[tuple[str, int, str]], x: np.ndarray) -> SemanticScreen:
    """Weights from every row, the threshold at BENIGN_QUANTILE of the out-of-fold benign scores."""
    y = np.array([label for _, label, _ in rows], dtype=np.float64)
    oof = out_of_fold(x, y)
    threshold = float(np.quantile(oof[y == 0], BENIGN_QUANTILE, method="higher"))
    w, b = fit(x, y)
    return SemanticScreen(w, b, round(threshold, 6), LOCAL_MODEL_NAME)


def calibrated(screen: SemanticScreen, runs: Runs) -> SemanticScreen:
    """The screen at the lowest threshold that flags at most RUN_FALSE_ALARMS of the calibration runs."""
    top = np.sort(run_scores(screen, runs.calibration))
    allowed = int(RUN_FALSE_ALARMS * len(top))  # this many runs may reach the threshold
    threshold = max(screen.threshold, float(np.nextafter(top[len(top) - 1 - allowed], 1.0)))
    return SemanticScreen(screen.weights, screen.bias, threshold, screen.model)


def run_scores(screen: SemanticScreen, runs: list[list[str]]) -> np.ndarray:
    """Each run's score: its highest segment's (0 for a run without a prose segment)."""
    unique = list(dict.fromkeys(s for found in runs for s in found))
    score_of = dict(zip(unique, screen.scores(embed(unique)))) if unique else {}
    return np.array([max((score_of[s] for s in found), default=0.0) for found in runs])


def report(rows: list[tuple[str, int, str]], x: np.ndarray, screen: SemanticScreen, runs: Runs | None) -> dict:
    y = np.array([label for _, label, _ in rows])
    families = sorted({family for _, label, family in rows if label})
    print(f"corpus: {int(y.sum())} hostile segments, {int((1 - y).sum())} benign; threshold {screen.threshold:.3f}")
    lofo = {}
    print("\nleave-one-family-out (trained without the family, recall on it at the same threshold):")
    for family in families:
        held = np.array([f == family for _, _, f in rows])
        w, b = fit(x[~held], y[~held])
        recall = float((SemanticScreen(w, b, 0.5, LOCAL_MODEL_NAME).scores(x[held]) >= screen.threshold).mean())
        lofo[family] = round(recall, 4)
        print(f"  {family:22} {recall:6.1%} of {int(held.sum())}")
    measured: dict = {"leave_one_family_out": lofo}
    for name, hostile, benign in (("held_out", HELDOUT_HOSTILE, HELDOUT_BENIGN),
                                  ("held_out2", HELDOUT2_HOSTILE, HELDOUT2_BENIGN)):
        measured[name] = held_out(name, screen, hostile, benign)
    if runs is not None:
        measured["public_runs"] = public_runs_report(screen, runs)
    return measured


def public_runs_report(screen: SemanticScreen, runs: Runs) -> dict:
    """False alarms on runs never trained on, at the shipped threshold and at the one calibrated on other runs
    (with the held-out recall that threshold leaves)."""
    out = {}
    for label, at in (("shipped threshold", screen), ("calibrated on fold 2", calibrated(screen, runs))):
        print(f"\npublic runs never trained on, {label} {at.threshold:.3f} (a run is flagged when its best advice "
              "sentence reaches it):")
        flagged = {}
        for agent, found in runs.test.items():
            hits = int((run_scores(at, found) >= at.threshold).sum())
            flagged[agent] = f"{hits}/{len(found)}"
            print(f"  {agent:28} {hits}/{len(found)} ({hits / max(1, len(found)):.1%})")
        recall = {}
        for name, hostile in (("held_out", HELDOUT_HOSTILE), ("held_out2", HELDOUT2_HOSTILE)):
            texts = [t for batch in hostile.values() for t in batch]
            hits = int(sum(s >= at.threshold for s in _text_scores(at, texts)))
            recall[name] = f"{hits}/{len(texts)}"
        print(f"  held-out recall at this threshold: {recall}")
        out[label] = {"threshold": round(at.threshold, 6), "runs_flagged": flagged, "held_out_recall": recall}
    return out


def held_out(name: str, screen: SemanticScreen, hostile: dict[str, list[str]], benign: list[str]) -> dict:
    """Recall per family and false alarms on one held-out batch, the rules' recall beside it."""
    print(f"\n{name} (written before training):               semantic            rules    either")
    texts = [t for family in hostile for t in hostile[family]]
    scored = {t: float(s) for t, s in zip(texts + benign, _text_scores(screen, texts + benign))}
    false_alarms = [t for t in benign if scored[t] >= screen.threshold]
    recall = {}
    for family, batch in hostile.items():
        semantic = sum(scored[t] >= screen.threshold for t in batch)
        rules = sum(bool(screen_text(t)) for t in batch)
        either = sum(scored[t] >= screen.threshold or bool(screen_text(t)) for t in batch)
        recall[family] = round(semantic / len(batch), 4)
        print(f"  {family:22} recall {semantic:2}/{len(batch)}  {semantic / len(batch):6.1%}   {rules:2}/{len(batch)}"
              f"    {either:2}/{len(batch)}")
    hits = sum(scored[t] >= screen.threshold for t in texts)
    either = sum(scored[t] >= screen.threshold or bool(screen_text(t)) for t in texts)
    precision = hits / max(1, hits + len(false_alarms))
    print(f"  all hostile            recall {hits}/{len(texts)} {hits / len(texts):6.1%}; with the rules {either}/"
          f"{len(texts)}; precision {precision:.1%} (false alarms {len(false_alarms)}/{len(benign)} benign notes)")
    for text in false_alarms:
        print(f"    false alarm {scored[text]:.2f}: {text}")
    return {"recall": recall, "flagged": f"{hits}/{len(texts)}", "with_rules": f"{either}/{len(texts)}",
            "false_alarms": f"{len(false_alarms)}/{len(benign)}"}


def _text_scores(screen: SemanticScreen, texts: list[str]) -> list[float]:
    """A text's score: its highest segment's, as a memory's is (0 when it has no prose segment: never scored)."""
    per_text = [segments_of_text(t) for t in texts]
    unique = list(dict.fromkeys(s for segs in per_text for s in segs))
    score_of = dict(zip(unique, screen.scores(embed(unique)))) if unique else {}
    return [max((score_of[s] for s in segs), default=0.0) for segs in per_text]


def main() -> int:
    global embed
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="retrain and compare with the shipped weights")
    parser.add_argument("--report", action="store_true", help="measure only; write nothing")
    parser.add_argument("--runs", nargs="+", type=Path, default=[], help="local copies of public agent runs")
    parser.add_argument("--cache", type=Path, help="a .npz file keeping the embeddings between invocations")
    args = parser.parse_args()

    start = time.perf_counter()
    embed = Embedder(args.cache)
    rows = corpus()
    runs = public_runs(args.runs) if args.runs else None
    if runs is not None:
        known = {text for text, _, _ in rows}
        rows += [(text, 0, "public runs") for text in runs.hard_negatives if text not in known]
    x = embed([text for text, _, _ in rows])
    screen = train(rows, x)
    digest = corpus_digest((text, label) for text, label, _ in rows)
    if runs is not None:
        digest = corpus_digest([(digest, 0), (runs.digest, 0)])
    print(f"trained in {time.perf_counter() - start:.0f} s (corpus {digest})")
    if args.check:
        shipped = load()
        same = (np.allclose(shipped.weights, screen.weights, atol=1e-5) and abs(shipped.bias - screen.bias) < 1e-5
                and abs(shipped.threshold - screen.threshold) < 1e-4)
        print("the shipped weights are reproduced" if same else "the shipped weights differ from a fresh training")
        return 0 if same else 1
    measured = report(rows, x, screen, runs)
    if not args.report:
        counts = {"hostile": sum(label for _, label, _ in rows), "benign": sum(1 - label for _, label, _ in rows)}
        WEIGHTS_FILE.write_text(json.dumps(screen.to_json(corpus=digest, segments=counts, measured=measured),
                                           indent=1) + "\n", encoding="utf-8")
        print(f"\nwrote {WEIGHTS_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
