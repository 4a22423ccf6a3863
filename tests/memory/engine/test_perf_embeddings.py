"""The local embedder's fast paths give the vectors of the plain path, in input order."""

import numpy as np
import pytest

from mtl_graph.memory.engine.embeddings import (
    LOCAL_MODEL_NAME,
    EmbeddingError,
    LocalEmbeddings,
    LocalEmbeddingsConfig,
)

TEXTS = [
    "x",
    "Run the tests after every edit.",
    "Quote shell variables: unquoted expansions split file names with spaces into several arguments.",
    "csv",
    "When a join fans out, totals are silently duplicated; count rows before and after every merge step.",
    "UTC",
    "Read the traceback from the bottom frame up, then the frames above it to see how the call got there.",
    "a b c d e f g",
    "Pin library versions.",
    "Seed every random generator before training so validation scores stop drifting between runs.",
]


def test_batches_sorted_by_length_come_back_in_input_order(embeddings):
    assert len(TEXTS) > embeddings.config.small_batch  # the multi-threaded batch session is used
    batch = embeddings.embed_array(TEXTS)
    one_by_one = np.array([embeddings.embed_query(t) for t in TEXTS])
    assert np.allclose(batch, one_by_one, atol=1e-5)
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    sims = batch @ batch.T
    assert sims[1, 9] < 0.99 and np.argmax(sims[2, [0, 2, 3]]) == 1  # distinct texts, each row its own


def test_small_batches_and_tiny_batch_sizes_agree(embeddings):
    small = LocalEmbeddings(config=LocalEmbeddingsConfig(batch_size=3, batch_threads=1))
    assert np.allclose(small.embed_array(TEXTS), embeddings.embed_array(TEXTS), atol=1e-5)
    assert small.embed_documents([]) == []


def test_a_text_longer_than_the_model_limit_is_truncated_not_refused(embeddings):
    vector = embeddings.embed_query("word " * 5000)
    assert len(vector) == 384 and np.isfinite(vector).all()


def test_another_model_file_gets_its_own_name(tmp_path):
    assert LocalEmbeddings.model_name == LOCAL_MODEL_NAME
    broken = tmp_path / "other-model.onnx"
    broken.write_bytes(b"not an onnx file")
    with pytest.raises(EmbeddingError, match="cannot load the local embedding model"):
        LocalEmbeddings(onnx=broken)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="query_threads"):
        LocalEmbeddingsConfig(query_threads=0)
