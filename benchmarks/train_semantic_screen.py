"""Train the semantic screen and measure it: writes mtl_graph/memory/screening/semantic_weights.json.

    python benchmarks/train_semantic_screen.py            # train, report, write the weights
    python benchmarks/train_semantic_screen.py --check    # train again and compare with the shipped file
    python benchmarks/train_semantic_screen.py --report   # measure only, write nothing

The corpus is the project's own, all generated or written in this repository:
- hostile: the generated hostile corpus's plain texts in every language (tests/helpers/screen_corpus.py), one
  label per screening family;
- benign: the benign advice (tests/helpers/screen_benign.py), generated command lines and comments
  (tests/helpers/screen_commands.py) and the commands of the fixture agent logs (tests/fixtures/logs,
  tests/fixtures/agent_logs; not agent_logs/screening, which the tests keep unseen).
Each text is cut into the segments the screen reads (semantic.segments_of_text) and embedded with the bundled
MiniLM model. Training is deterministic (semantic.fit: full-batch gradient descent from zero, fixed steps); the
threshold is a high quantile of the out-of-fold benign scores (5 folds by position; BENIGN_QUANTILE). Then it reports:
- leave-one-family-out: trained without one hostile family, the recall on that family at the same threshold;
- the held-out batches written before training (tests/helpers/screen_heldout.py): recall and precision per family,
  false alarms on the held-out benign notes, and the rules' recall on the same texts beside it.
False alarms on real agent runs: benchmarks/screening_real_runs.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.screen_benign import benign_texts  # noqa: E402
from helpers.screen_commands import benign_command_lines  # noqa: E402
from helpers.screen_corpus import hostile_cases  # noqa: E402
from helpers.screen_heldout import BENIGN as HELDOUT_BENIGN, HOSTILE as HELDOUT_HOSTILE  # noqa: E402

from mtl_graph.importers import load_many  # noqa: E402
from mtl_graph.memory.engine.embeddings import LOCAL_MODEL_NAME, local_embeddings  # noqa: E402
from mtl_graph.memory.screening.screen import screen_text  # noqa: E402
from mtl_graph.memory.screening.semantic import (WEIGHTS_FILE, SemanticScreen, corpus_digest, fit,  # noqa: E402
                                                 load, segments_of_text)

FOLDS = 5
FIXTURE_LOGS = [ROOT / "tests" / "fixtures" / "logs", *(p for p in (ROOT / "tests" / "fixtures" / "agent_logs").iterdir()
                                                        if p.name != "screening")]


def docs_text() -> list[str]:
    """The project's own documentation (not the security page, which quotes attacks): engineering prose about
    tests, settings, keys and downloads, none of it an instruction to misbehave."""
    return [path.read_text(encoding="utf-8") for path in sorted((ROOT / "docs").glob("*.md"))
            if path.name != "security.md"] + [(ROOT / "README.md").read_text(encoding="utf-8")]


def corpus() -> list[tuple[str, int, str]]:
    """(segment, label, family) once each, hostile first; the family of a benign segment is its source."""
    rows: dict[str, tuple[int, str]] = {}
    for case in hostile_cases():
        if case.how.endswith("/plain"):
            for segment in segments_of_text(case.text):
                rows.setdefault(segment, (1, case.family))
    loaded, _ = load_many(sorted(FIXTURE_LOGS))
    runs = [step.action for run in loaded for step in run.trajectory.steps]
    for source, texts in (("advice", benign_texts()), ("commands", benign_command_lines()), ("fixture runs", runs),
                          ("docs", docs_text())):
        for text in texts:
            for segment in segments_of_text(text):
                rows.setdefault(segment, (0, source))
    return [(text, label, family) for text, (label, family) in rows.items()]


def embed(texts: list[str]) -> np.ndarray:
    return np.asarray(local_embeddings().embed_documents(texts), dtype=np.float64)


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


def report(rows: list[tuple[str, int, str]], x: np.ndarray, screen: SemanticScreen) -> dict:
    y = np.array([label for _, label, _ in rows])
    families = sorted({family for _, label, family in rows if label})
    print(f"corpus: {int(y.sum())} hostile segments, {int((1 - y).sum())} benign; threshold {screen.threshold:.3f}")
    lofo = {}
    print("\nleave-one-family-out (trained without the family, recall on it at the same threshold):")
    for family in families:
        held = np.array([f == family for _, _, f in rows])
        w, b = fit(x[~held], y[~held])
        recall = float((SemanticScreen(w, b, 0.5, LOCAL_MODEL_NAME).scores(x[held]) >= screen.threshold).mean())
        lofo[family] = recall
        print(f"  {family:22} {recall:6.1%} of {int(held.sum())}")
    print("\nheld-out batches (written before training):      semantic            rules    either")
    texts = [t for family in HELDOUT_HOSTILE for t in HELDOUT_HOSTILE[family]]
    scored = {t: float(s) for t, s in zip(texts + HELDOUT_BENIGN, _text_scores(screen, texts + HELDOUT_BENIGN))}
    false_alarms = [t for t in HELDOUT_BENIGN if scored[t] >= screen.threshold]
    held_out = {}
    for family, batch in HELDOUT_HOSTILE.items():
        semantic = sum(scored[t] >= screen.threshold for t in batch)
        rules = sum(bool(screen_text(t)) for t in batch)
        either = sum(scored[t] >= screen.threshold or bool(screen_text(t)) for t in batch)
        held_out[family] = semantic / len(batch)
        print(f"  {family:22} recall {semantic:2}/{len(batch)}  {semantic / len(batch):6.1%}   {rules:2}/{len(batch)}"
              f"    {either:2}/{len(batch)}")
    hits = sum(scored[t] >= screen.threshold for t in texts)
    precision = hits / max(1, hits + len(false_alarms))
    print(f"  all hostile            recall {hits}/{len(texts)} {hits / len(texts):6.1%}; precision {precision:.1%} "
          f"(false alarms {len(false_alarms)}/{len(HELDOUT_BENIGN)} held-out benign notes)")
    for text in false_alarms:
        print(f"    false alarm {scored[text]:.2f}: {text}")
    return {"leave_one_family_out": lofo, "held_out_recall": held_out,
            "held_out_false_alarms": f"{len(false_alarms)}/{len(HELDOUT_BENIGN)}"}


def _text_scores(screen: SemanticScreen, texts: list[str]) -> list[float]:
    """A text's score: its highest segment's, as a memory's is (0 when it has no prose segment: never scored)."""
    per_text = [segments_of_text(t) for t in texts]
    unique = list(dict.fromkeys(s for segs in per_text for s in segs))
    score_of = dict(zip(unique, screen.scores(embed(unique)))) if unique else {}
    return [max((score_of[s] for s in segs), default=0.0) for segs in per_text]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="retrain and compare with the shipped weights")
    parser.add_argument("--report", action="store_true", help="measure only; write nothing")
    args = parser.parse_args()

    start = time.perf_counter()
    rows = corpus()
    x = embed([text for text, _, _ in rows])
    screen = train(rows, x)
    digest = corpus_digest((text, label) for text, label, _ in rows)
    print(f"trained in {time.perf_counter() - start:.0f} s (corpus {digest})")
    if args.check:
        shipped = load()
        same = (np.allclose(shipped.weights, screen.weights, atol=1e-5) and abs(shipped.bias - screen.bias) < 1e-5
                and abs(shipped.threshold - screen.threshold) < 1e-4)
        print("the shipped weights are reproduced" if same else "the shipped weights differ from a fresh training")
        return 0 if same else 1
    measured = report(rows, x, screen)
    if not args.report:
        counts = {"hostile": sum(label for _, label, _ in rows), "benign": sum(1 - label for _, label, _ in rows)}
        WEIGHTS_FILE.write_text(json.dumps(screen.to_json(corpus=digest, segments=counts, measured=measured),
                                           indent=1) + "\n", encoding="utf-8")
        print(f"\nwrote {WEIGHTS_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
