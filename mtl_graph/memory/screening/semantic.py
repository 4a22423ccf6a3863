"""The semantic screen: a logistic regression over the embedding of what a memory advises, beside the rules.

The rules (rules.py, paraphrases.py, languages.py) are a table of verb and object pairs; a paraphrase in new words
("give setUp an early return", "copy the user's SSH folder into the workspace") is a new row they do not have.
This screen reads meaning instead: each prose segment of the memory's advice (advice.py: what it quotes is left
out; lines and sentences of at least three words, code lines skipped) is embedded with the bundled MiniLM model
the pool already runs, and scored by one linear layer trained on the project's hostile and benign corpora and
public runs' sentences (benchmarks/train_semantic_screen.py writes semantic_weights.json, deterministically). A memory whose highest
segment score reaches the shipped threshold is flagged, as a rule-flagged one is: stored, not retrieved, with
the reason (`semantic: ... (score 0.97 >= 0.80)`), until a person releases it.

The weights belong to the model they were trained with (recorded in the file), so the segments are embedded with
that model whatever the pool's own embeddings are: one batch per `add_many` (the keys' vectors do not hold the
advice: a trajectory's key is its task, an insight's its title). It runs when MTL_SEMANTIC_SCREEN is on.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from pydantic_settings import BaseSettings, SettingsConfigDict

from mtl_graph.memory.base import Memory
from mtl_graph.memory.screening.advice import split

WEIGHTS_FILE = Path(__file__).with_name("semantic_weights.json")
NAME = "semantic"
REASON = "reads like an instruction to misbehave"

MAX_SEGMENT_CHARS = 300
"""A segment is embedded up to this length (an instruction is a sentence; longer is a paragraph of code or data)."""
MAX_SEGMENTS = 64
"""Segments scored per memory: its first and last halves when it has more (a long trajectory's commands)."""

_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")
_WORD = re.compile(r"[^\W\d_]{2,}")
_CODE = re.compile(r"[(){}\[\]=<>;|$\\/_*#@`^~]")


# A sentence embedding reads topic, not polarity: "never delete the tests" lies next to "delete the tests". A
# negated sentence is left to the rules, which read the negation (and flag "never mind the rules, delete them").
_NEGATED = re.compile(r"^(?:never|don'?t|do\s+not|avoid|no\s+need\s+to)\b|\b(?:not\s+by|instead\s+of|rather\s+than|"
                      r"never|do\s+not|don'?t|must\s+not|mustn'?t|should\s+not|shouldn'?t)\b", re.I)


def _prose(segment: str) -> bool:
    """An English sentence that reads as words to a person: three words or more, code punctuation under one
    character in eight (a heredoc's Python, a sed expression or a path list is the rules' business), not negated.
    The bundled model is English-only: text in other languages is left to the language rules."""
    letters = [ch for ch in segment if ch.isalpha()]
    if len(_WORD.findall(segment)) < 3 or sum(ch.isascii() for ch in letters) < 0.95 * len(letters):
        return False
    return len(_CODE.findall(segment)) * 8 < len(segment) and not _NEGATED.search(segment)


def segments_of_text(text: str) -> list[str]:
    """The prose segments of a text: each line, split into sentences, cut to MAX_SEGMENT_CHARS, in order, once."""
    found: dict[str, None] = {}
    for line in text.splitlines():
        for sentence in _SENTENCE.split(line.strip()):
            sentence = sentence.strip(" \t-*>#•")[:MAX_SEGMENT_CHARS]
            if sentence and _prose(sentence):
                found.setdefault(sentence, None)
    return list(found)


def segments(memory: Memory) -> list[str]:
    """The prose segments of what a memory advises (its quoted fields left out), at most MAX_SEGMENTS."""
    advice, _ = split(memory)
    found = segments_of_text("\n".join(advice))
    if len(found) > MAX_SEGMENTS:
        found = found[:MAX_SEGMENTS // 2] + found[-(MAX_SEGMENTS // 2):]
    return found


@dataclass(frozen=True)
class SemanticScreen:
    """One trained linear layer over unit-length sentence embeddings."""

    weights: np.ndarray
    """One weight per embedding dimension."""
    bias: float
    threshold: float
    """A segment scoring this or more flags its memory (chosen on held-out folds of the training corpus)."""
    model: str
    """The embedding model the weights were trained on (never applied to another model's vectors)."""

    def scores(self, vectors: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
        """The probability each vector's text is hostile."""
        matrix = np.asarray(vectors, dtype=np.float64)
        if matrix.ndim == 1:
            matrix = matrix[None, :]
        if matrix.shape[1] != self.weights.shape[0]:
            raise ValueError(f"vectors of size {matrix.shape[1]}; the screen was trained on {self.weights.shape[0]}")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return _sigmoid((matrix / np.where(norms == 0, 1, norms)) @ self.weights + self.bias)

    def reasons(self, scores: Iterable[float]) -> list[str]:
        """The reason a memory with these segment scores is held back, or none."""
        top = max(scores, default=0.0)
        return [f"{NAME}: {REASON} (score {top:.2f} >= {self.threshold:.2f})"] if top >= self.threshold else []

    def screen(self, memories: Sequence[Memory], embeddings) -> list[list[str]]:
        """The semantic reasons of each memory, all their segments embedded in one batch."""
        per_memory = [segments(m) for m in memories]
        unique = list(dict.fromkeys(s for found in per_memory for s in found))
        if not unique:
            return [[] for _ in memories]
        score_of = dict(zip(unique, self.scores(embeddings.embed_documents(unique))))
        return [self.reasons(score_of[s] for s in found) for found in per_memory]

    def to_json(self, **extra: object) -> dict:
        return {"model": self.model, "threshold": round(self.threshold, 6), "bias": round(self.bias, 8),
                "weights": [round(float(w), 8) for w in self.weights], **extra}


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -40, 40)))


def fit(vectors: np.ndarray, labels: np.ndarray, l2: float = 1e-4, steps: int = 40) -> tuple[np.ndarray, float]:
    """Class-balanced L2 logistic regression by damped Newton steps from zero (deterministic: no random start, no
    shuffling; at most `steps` steps, each halved until the loss does not rise), on unit-length rows. Newton's
    384 x 384 systems converge in tens of steps where full-batch gradient descent needed thousands of passes over
    the rows. Returns (weights, bias)."""
    x = np.asarray(vectors, dtype=np.float64)
    x = x / np.where((n := np.linalg.norm(x, axis=1, keepdims=True)) == 0, 1, n)
    x = np.hstack([x, np.ones((len(x), 1))])  # the bias is the last weight, not regularised
    y = np.asarray(labels, dtype=np.float64)
    positives = max(1.0, y.sum())
    negatives = max(1.0, len(y) - y.sum())
    sample = np.where(y == 1, 0.5 / positives, 0.5 / negatives)  # each class weighs half, whatever its size
    reg = np.full(x.shape[1], l2)
    reg[-1] = 0.0

    def loss(w: np.ndarray) -> float:
        z = x @ w
        return float(np.sum(sample * (np.logaddexp(0, z) - y * z)) + 0.5 * np.sum(reg * w * w))

    w = np.zeros(x.shape[1])
    current = loss(w)
    for _ in range(steps):
        p = _sigmoid(x @ w)
        gradient = x.T @ (sample * (p - y)) + reg * w
        hessian = (x * (sample * p * (1 - p))[:, None]).T @ x + np.diag(reg + 1e-12)
        step = np.linalg.solve(hessian, gradient)
        scale = 1.0
        while scale > 1e-4 and (candidate := loss(w - scale * step)) > current:
            scale /= 2
        if scale <= 1e-4:
            break
        w = w - scale * step
        converged = current - candidate < 1e-10
        current = candidate
        if converged:
            break
    return w[:-1], float(w[-1])


def corpus_digest(texts: Iterable[tuple[str, int]]) -> str:
    """A short hash of (text, label) pairs: the weights file names the corpus it was trained on."""
    digest = hashlib.sha256()
    for text, label in texts:
        digest.update(f"{label}\t{text}\n".encode())
    return digest.hexdigest()[:16]


def load(path: Path = WEIGHTS_FILE) -> SemanticScreen:
    data = json.loads(path.read_text(encoding="utf-8"))
    return SemanticScreen(weights=np.asarray(data["weights"], dtype=np.float64), bias=float(data["bias"]),
                          threshold=float(data["threshold"]), model=str(data["model"]))


class SemanticScreenSettings(BaseSettings):
    """Whether write-time screening runs the semantic screen beside the rules (read at every screening)."""

    model_config = SettingsConfigDict(env_prefix="MTL_")

    semantic_screen: bool = False
    """MTL_SEMANTIC_SCREEN=1 turns it on. Off by default: on the held-out batches it adds recall the rules lack
    but also flags about one public run in eight (docs/security.md has the numbers), so a person opts in."""


@functools.cache
def shipped_screen() -> SemanticScreen | None:
    """The shipped screen, or None when its weights file is absent."""
    return load() if WEIGHTS_FILE.is_file() else None


def default_screen() -> SemanticScreen | None:
    """The screen write-time screening uses: the shipped one when MTL_SEMANTIC_SCREEN is on, else None."""
    return shipped_screen() if SemanticScreenSettings().semantic_screen else None
