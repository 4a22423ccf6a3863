"""The bundled model's vectors are those pools were written with, whether loaded from the pre-optimised cache or not."""

import json

import numpy as np

from mtl_graph.memory.engine.embeddings import LocalEmbeddings, LocalEmbeddingsConfig
from helpers.paths import FIXTURES

REFERENCE = json.loads((FIXTURES / "local_model_vectors.json").read_text(encoding="utf-8"))


def _assert_reference_vectors(embeddings: LocalEmbeddings) -> None:
    """Within 1e-5 cosine of the vectors the bundled model gave before the cache existed, one by one and batched."""
    reference = np.array(REFERENCE["vectors"])
    assert embeddings.model_name == REFERENCE["model"]
    for got in (np.array([embeddings.embed_query(t) for t in REFERENCE["texts"]]),
                embeddings.embed_array(REFERENCE["texts"])):
        cosines = (got * reference).sum(axis=1) / np.linalg.norm(reference, axis=1)
        assert cosines.min() > 1 - 1e-5


def test_the_process_model_gives_the_vectors_existing_pools_hold(embeddings):
    _assert_reference_vectors(embeddings)


def test_the_model_is_optimised_once_then_loaded_from_the_cache(tmp_path):
    first = LocalEmbeddings(config=LocalEmbeddingsConfig(model_cache=str(tmp_path)))
    entries = [p for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert len(entries) == 1 and first._model == entries[0] / "model.onnx"
    assert (entries[0] / "model.data").is_file() and not list(tmp_path.glob(".staging-*"))
    stamp = first._model.stat().st_mtime_ns
    second = LocalEmbeddings(config=LocalEmbeddingsConfig(model_cache=str(tmp_path)))
    assert second._model == first._model and second._model.stat().st_mtime_ns == stamp  # reused, not rewritten
    _assert_reference_vectors(second)


def test_without_a_cache_the_original_model_is_loaded(tmp_path):
    uncached = LocalEmbeddings(config=LocalEmbeddingsConfig(model_cache=""))
    assert uncached._model == uncached._onnx
    _assert_reference_vectors(uncached)


def test_a_cache_path_that_is_a_file_falls_back_to_the_original_model(tmp_path):
    blocker = tmp_path / "cache"
    blocker.write_text("not a directory")
    embeddings = LocalEmbeddings(config=LocalEmbeddingsConfig(model_cache=str(blocker)))
    assert embeddings._model == embeddings._onnx
    _assert_reference_vectors(embeddings)


def test_a_damaged_cache_entry_is_rebuilt(tmp_path):
    cached = LocalEmbeddings(config=LocalEmbeddingsConfig(model_cache=str(tmp_path)))._model
    size = (cached.parent / "model.data").stat().st_size
    (cached.parent / "model.data").write_bytes(b"truncated")
    embeddings = LocalEmbeddings(config=LocalEmbeddingsConfig(model_cache=str(tmp_path)))
    assert embeddings._model == cached and (cached.parent / "model.data").stat().st_size == size
    _assert_reference_vectors(embeddings)
