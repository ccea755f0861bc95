"""Time real prefill and decode steps of a dense decoder in PyTorch on one GPU.

What it measures: one forward step of a Llama-style model (Llama-3.1-8B, Qwen3-32B: the
configs shipped in ``src/infercast/data/models``) with random weights, as a serving engine
runs it: fused QKV and gate/up projections, RoPE, FlashAttention through
``torch.nn.functional.scaled_dot_product_attention`` (causal with GQA for prefill; for
decode the query heads of each KV head packed as rows, the layout FlashAttention's own
decode path uses), SwiGLU MLP, RMSNorm, logits only for each sequence's last token and a
greedy pick. Each step is captured once in a CUDA graph and replayed (what vLLM, SGLang and
TensorRT-LLM do for decode), so the time is the GPU's, without Python's launch overhead;
``eager_s`` times the same step launched from Python for comparison.

Timing: CUDA events around each replay after warm-up replays; the median of ``--reps``
replays is the result. Ceilings measured in the same run: a bf16 (and fp8) 8192^3 matrix
product and a device-to-device copy, so each step can be read as a fraction of what this
part reaches.

Only PyTorch and the standard library are needed (no infercast import), so the script runs
on a bare GPU machine. ``--device cpu --tiny`` runs a shrunken model on the CPU to check the
code (no graphs, no timing worth reading). Results go to one JSON file;
``benchmarks/gpu_steps_rows.py`` turns them into rows of the measurement set.

    python benchmarks/gpu_steps.py --out gpu_steps.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

MODELS_DIR = Path(__file__).resolve().parents[1] / "src" / "infercast" / "data" / "models"

# (batch, prompt tokens) and (batch, context tokens) per model; KV bytes of the largest
# decode shape stay under ~35 GB so weights + cache fit one 141 GB part with room to spare.
PREFILL = {
    "llama-3.1-8b": [(1, 128), (1, 512), (1, 2048), (1, 8192), (8, 1024)],
    "qwen3-32b": [(1, 128), (1, 512), (1, 2048), (1, 8192)],
}
DECODE = {
    "llama-3.1-8b": [
        (b, c) for c in (1024, 4096) for b in (1, 8, 32, 64, 128, 256) if b * c <= 262144
    ]
    + [(1, 32768)],
    "qwen3-32b": [(b, c) for c in (1024, 4096) for b in (1, 8, 32, 128) if b * c <= 131072],
}
ALL_BACKENDS = [
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.CUDNN_ATTENTION,
    SDPBackend.MATH,
]
FP8_PREFILL = [(1, 512), (1, 2048), (1, 8192)]
# --set int4: weight-only int4 (bf16 activations) against the bf16 and fp8 steps of the main set,
# and the fp8 decode batches the main set lacks
INT4_PREFILL = [(1, 512), (1, 2048), (1, 8192)]
INT4_DECODE = [(1, 1024), (8, 1024), (32, 1024), (128, 1024), (256, 1024)]
FP8_MORE_DECODE = [(8, 1024), (256, 1024)]
INT4_GROUP, INT4_INNER_K_TILES = 128, 8  # gpt-fast's int4 defaults
# --set mixed: (decode batch, its context, prompt chunk) chunked-prefill steps, and the pure
# decode steps at that context to set them against (the prefills are in the main set)
MIXED = {
    "llama-3.1-8b": [(8, 2048, 512), (32, 2048, 512), (32, 2048, 2048), (128, 2048, 512),
                     (128, 2048, 2048)],
    "qwen3-32b": [(8, 2048, 512), (32, 2048, 512), (32, 2048, 2048)],
}  # fmt: skip
MIXED_DECODE = {"llama-3.1-8b": [(8, 2048), (32, 2048), (128, 2048)],
                "qwen3-32b": [(8, 2048), (32, 2048)]}  # fmt: skip
FP8_DECODE = [(1, 1024), (32, 1024), (128, 1024)]


@dataclass(frozen=True)
class Dims:
    """The shapes of a decoder, read from a Hugging Face config.json."""

    hidden: int
    inter: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    eps: float
    qk_norm: bool  # Qwen3 normalises q and k per head before RoPE

    @classmethod
    def from_config(cls, cfg: dict, tiny: bool = False) -> Dims:
        heads = cfg["num_attention_heads"]
        d = cls(
            hidden=cfg["hidden_size"],
            inter=cfg["intermediate_size"],
            layers=cfg["num_hidden_layers"],
            heads=heads,
            kv_heads=cfg.get("num_key_value_heads", heads),
            head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
            vocab=cfg["vocab_size"],
            eps=cfg.get("rms_norm_eps", 1e-6),
            qk_norm=cfg.get("model_type") == "qwen3",
        )
        if tiny:  # same head layout, small widths: a check of the code on a CPU
            d = Dims(256, 512, 2, d.heads // 4 or 1, d.kv_heads // 4 or 1, 32, 1000, d.eps,
                     d.qk_norm)  # fmt: skip
        return d


class Decoder:
    """Random-weight decoder; ``prefill`` and ``decode`` are one engine step each."""

    def __init__(self, dims: Dims, device: str, dtype: torch.dtype, weights: str, seed: int):
        self.d, self.dev, self.dt, self.weights = dims, device, dtype, weights
        g = torch.Generator(device=device).manual_seed(seed)
        self.gen = g
        d = dims
        q, kv = d.heads * d.head_dim, d.kv_heads * d.head_dim

        def w(*shape: int) -> torch.Tensor:
            t = torch.empty(shape, device=device, dtype=dtype)
            return t.normal_(0.0, 0.02, generator=g)

        self.embed = w(d.vocab, d.hidden)
        self.layers = []
        for _ in range(d.layers):
            layer = {
                "ln1": torch.ones(d.hidden, device=device, dtype=dtype),
                "ln2": torch.ones(d.hidden, device=device, dtype=dtype),
                "qkv": self._weight(w(q + 2 * kv, d.hidden)),
                "o": self._weight(w(d.hidden, q)),
                "gate_up": self._weight(w(2 * d.inter, d.hidden)),
                "down": self._weight(w(d.hidden, d.inter)),
            }
            if d.qk_norm:
                layer["qn"] = torch.ones(d.head_dim, device=device, dtype=dtype)
                layer["kn"] = torch.ones(d.head_dim, device=device, dtype=dtype)
            self.layers.append(layer)
        self.norm = torch.ones(d.hidden, device=device, dtype=dtype)
        self.lm_head = w(d.vocab, d.hidden)  # kept in bf16, as fp8 checkpoints do
        self.one = torch.ones((), device=device, dtype=torch.float32)
        self.repeat_kv = False  # set by attention_setup where flash takes no GQA
        self.return_logits = False  # True: the steps return logits (the consistency check)

    def _weight(self, t: torch.Tensor):
        if self.weights == "fp8":  # e4m3 weights, scale 1 (per-tensor static scales cost the same)
            return t.to(torch.float8_e4m3fn)
        if self.weights == "int4":
            return self._int4(*t.shape)
        return t

    def _int4(self, n: int, k: int) -> tuple:
        """Random 4-bit weights in PyTorch's CUDA int4 layout (tinygemm: gpt-fast's and
        torchao's weight-only int4), groups of INT4_GROUP along k with a bf16 scale and zero."""
        q = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=self.dev,
                          generator=self.gen)  # fmt: skip
        packed = torch.ops.aten._convert_weight_to_int4pack(q, INT4_INNER_K_TILES)
        sz = torch.empty(k // INT4_GROUP, n, 2, device=self.dev, dtype=self.dt)
        sz[..., 0], sz[..., 1] = 0.002, 0.0
        return packed, sz

    def linear(self, x: torch.Tensor, weight) -> torch.Tensor:
        if self.weights == "int4":
            packed, sz = weight
            return torch.ops.aten._weight_int4pack_mm(x.contiguous(), packed, INT4_GROUP, sz)
        if self.weights != "fp8":
            return F.linear(x, weight)
        rows = x.shape[0]
        pad = -rows % 16  # cuBLASLt fp8 wants rows in multiples of 16, as engines pad
        xq = F.pad(x, (0, 0, 0, pad)) if pad else x
        out = torch._scaled_mm(
            xq.to(torch.float8_e4m3fn),
            weight.t(),
            scale_a=self.one,
            scale_b=self.one,
            out_dtype=self.dt,
        )
        return out[:rows] if pad else out

    def rms(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), weight, self.d.eps)

    def rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return x * cos + torch.cat((-x2, x1), dim=-1) * sin

    def rope_table(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d = self.d.head_dim
        inv = 1.0 / (500000.0 ** (torch.arange(0, d, 2, device=self.dev).float() / d))
        ang = positions.float()[:, None] * inv[None, :]
        ang = torch.cat((ang, ang), dim=-1)
        return ang.cos().to(self.dt), ang.sin().to(self.dt)

    def _qkv(self, layer: dict, x: torch.Tensor, b: int, s: int, cos, sin):
        return self._heads(layer, self.linear(x, layer["qkv"]), b, s, cos, sin)

    def _heads(self, layer: dict, qkv: torch.Tensor, b: int, s: int, cos, sin):
        """Projected rows -> q, k, v as [batch, tokens, heads, head_dim], normed and rotated."""
        d = self.d
        q, k, v = qkv.split(
            [d.heads * d.head_dim, d.kv_heads * d.head_dim, d.kv_heads * d.head_dim], dim=-1
        )
        q = q.reshape(b, s, d.heads, d.head_dim)
        k = k.reshape(b, s, d.kv_heads, d.head_dim)
        v = v.reshape(b, s, d.kv_heads, d.head_dim)
        if d.qk_norm:
            q, k = self.rms(q, layer["qn"]), self.rms(k, layer["kn"])
        c, n = cos[None, :, None, :], sin[None, :, None, :]
        return self.rope(q, c, n), self.rope(k, c, n), v

    def _causal(self, q, k, v) -> torch.Tensor:
        """Causal attention of a fresh prompt, [batch, tokens, heads, dim] in, rows out."""
        b, s = q.shape[:2]
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        if self.repeat_kv:  # the attention kernel takes no GQA: give it every head
            k = k.repeat_interleave(self.d.heads // self.d.kv_heads, dim=1)
            v = v.repeat_interleave(self.d.heads // self.d.kv_heads, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return a.transpose(1, 2).reshape(b * s, -1)

    def _cached(self, q, k, v, cache_layer, position: int) -> torch.Tensor:
        """One new token per sequence against its cache (written first), rows out."""
        d, b = self.d, q.shape[0]
        kc, vc = cache_layer
        kc[:, :, position].copy_(k[:, 0])
        vc[:, :, position].copy_(v[:, 0])
        # the g query heads sharing a KV head become g query rows of that head
        qg = q.view(b, d.kv_heads, d.heads // d.kv_heads, d.head_dim)
        a = F.scaled_dot_product_attention(qg, kc[:, :, : position + 1], vc[:, :, : position + 1])
        return a.reshape(b, d.heads * d.head_dim)

    def _mlp(self, layer: dict, h: torch.Tensor) -> torch.Tensor:
        gate, up = self.linear(self.rms(h, layer["ln2"]), layer["gate_up"]).chunk(2, dim=-1)
        return h + self.linear(F.silu(gate) * up, layer["down"])

    def _head(self, h: torch.Tensor) -> torch.Tensor:
        logits = F.linear(self.rms(h, self.norm), self.lm_head)
        return logits if self.return_logits else logits.argmax(dim=-1)

    def prefill(self, tokens: torch.Tensor, cache: list | None = None) -> torch.Tensor:
        """One prefill step of ``tokens`` [batch, prompt]; fills ``cache`` when given."""
        b, s = tokens.shape
        d = self.d
        cos, sin = self.rope_table(torch.arange(s, device=self.dev))
        h = self.embed[tokens].view(b * s, d.hidden)
        for i, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, self.rms(h, layer["ln1"]), b, s, cos, sin)
            if cache is not None:
                cache[i][0][:, :, :s].copy_(k.transpose(1, 2))
                cache[i][1][:, :, :s].copy_(v.transpose(1, 2))
            h = h + self.linear(self._causal(q, k, v), layer["o"])
            h = self._mlp(layer, h)
        last = h.view(b, s, d.hidden)[:, -1]
        return self._head(last)

    def decode(self, tokens: torch.Tensor, cache: list, position: int) -> torch.Tensor:
        """One decode step: ``tokens`` [batch] at ``position``; the cache holds
        ``position`` earlier tokens and this step writes its own K/V after them."""
        b = tokens.shape[0]
        # arange, not torch.tensor: a host-to-device copy cannot be captured in a graph
        cos, sin = self.rope_table(torch.arange(position, position + 1, device=self.dev))
        h = self.embed[tokens]
        for i, layer in enumerate(self.layers):
            q, k, v = self._qkv(layer, self.rms(h, layer["ln1"]), b, 1, cos, sin)
            h = h + self.linear(self._cached(q, k, v, cache[i], position), layer["o"])
            h = self._mlp(layer, h)
        return self._head(h)

    def mixed(self, tokens, cache: list, position: int, chunk, chunk_cache: list):
        """One chunked-prefill step as vLLM v1 and SGLang's mixed chunk run it: ``tokens``
        [batch] decoding at ``position`` and a fresh prompt's first chunk [1, tokens] share
        every projection and MLP product (batch + chunk rows); attention runs per part; the
        chunk's K/V go to ``chunk_cache``."""
        b, s = tokens.shape[0], chunk.shape[1]
        cos_d, sin_d = self.rope_table(torch.arange(position, position + 1, device=self.dev))
        cos_p, sin_p = self.rope_table(torch.arange(s, device=self.dev))
        h = torch.cat((self.embed[tokens], self.embed[chunk[0]]))
        for i, layer in enumerate(self.layers):
            qkv = self.linear(self.rms(h, layer["ln1"]), layer["qkv"])
            dec = self._heads(layer, qkv[:b], b, 1, cos_d, sin_d)
            pre = self._heads(layer, qkv[b:], 1, s, cos_p, sin_p)
            chunk_cache[i][0].copy_(pre[1].transpose(1, 2))
            chunk_cache[i][1].copy_(pre[2].transpose(1, 2))
            a = torch.cat((self._cached(*dec, cache[i], position), self._causal(*pre)))
            h = h + self.linear(a, layer["o"])
            h = self._mlp(layer, h)
        return self._head(torch.cat((h[:b], h[-1:])))

    def new_cache(self, batch: int, tokens: int) -> list:
        d = self.d
        shape = (batch, d.kv_heads, tokens, d.head_dim)
        return [
            (
                torch.empty(shape, device=self.dev, dtype=self.dt).normal_(0, 1),
                torch.empty(shape, device=self.dev, dtype=self.dt).normal_(0, 1),
            )
            for _ in range(d.layers)
        ]


def attention_setup(model: Decoder) -> tuple[list, str]:
    """The SDPA backends to allow and their name: FlashAttention alone where it runs both
    steps' shapes (GQA natively, else with K/V repeated per query head), else PyTorch's
    choice."""
    if not model.dev.startswith("cuda"):
        return [], "pytorch default (cpu)"
    d, dev, dt = model.d, model.dev, model.dt
    q = torch.randn(1, d.heads, 64, d.head_dim, device=dev, dtype=dt)
    k = torch.randn(1, d.kv_heads, 64, d.head_dim, device=dev, dtype=dt)
    qg = torch.randn(1, d.kv_heads, d.heads // d.kv_heads, d.head_dim, device=dev, dtype=dt)
    flash = [SDPBackend.FLASH_ATTENTION]
    for repeat in (False, True):
        kk = k.repeat_interleave(d.heads // d.kv_heads, dim=1) if repeat else k
        try:
            with sdpa_kernel(flash):
                F.scaled_dot_product_attention(q, kk, kk, is_causal=True, enable_gqa=True)
                F.scaled_dot_product_attention(qg, k, k)
        except RuntimeError:
            continue
        model.repeat_kv = repeat
        return flash, "flash" + (" (kv repeated per head)" if repeat else " (gqa)")
    return [], "pytorch default (flash unavailable)"


def decode_matches_prefill(device: str, dtype: torch.dtype = torch.float32) -> float:
    """Largest |logit| difference between decoding token s after a prefill of s tokens and
    prefilling all s+1 at once, on a shrunken Qwen3 (GQA and q/k norms): near zero when the
    cache, RoPE positions and head packing of the decode step are right."""
    cfg = json.loads((MODELS_DIR / "qwen3-32b.json").read_text())
    model = Decoder(Dims.from_config(cfg, tiny=True), device, dtype, "bf16", seed=0)
    model.return_logits = True
    backends, _ = attention_setup(model)
    tokens = torch.randint(0, model.d.vocab, (2, 9), device=device)
    s = tokens.shape[1] - 1
    cache = model.new_cache(2, s + 1)
    with torch.inference_mode(), sdpa_kernel(backends or ALL_BACKENDS):
        model.prefill(tokens[:, :s], cache)
        stepped = model.decode(tokens[:, s], cache, s)
        whole = model.prefill(tokens)
    return float((stepped.float() - whole.float()).abs().max())


def mixed_matches_parts(device: str, dtype: torch.dtype = torch.float32) -> float:
    """Largest |logit| difference between a mixed step and its two parts run alone (a
    decode step of the batch and a prefill of the chunk): near zero when the shared rows
    are split back right."""
    cfg = json.loads((MODELS_DIR / "llama-3.1-8b.json").read_text())
    model = Decoder(Dims.from_config(cfg, tiny=True), device, dtype, "bf16", seed=0)
    model.return_logits = True
    backends, _ = attention_setup(model)
    tokens = torch.randint(0, model.d.vocab, (3,), device=device)
    chunk = torch.randint(0, model.d.vocab, (1, 7), device=device)
    cache, chunk_cache = model.new_cache(3, 5), model.new_cache(1, 7)
    with torch.inference_mode(), sdpa_kernel(backends or ALL_BACKENDS):
        both = model.mixed(tokens, cache, 4, chunk, chunk_cache)
        alone = torch.cat((model.decode(tokens, cache, 4), model.prefill(chunk)))
    return float((both.float() - alone.float()).abs().max())


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_fn(fn, device: str, reps: int, warmup: int = 2) -> list[float]:
    """Seconds per call of ``fn``: CUDA events on a GPU, the wall clock on a CPU."""
    for _ in range(warmup):
        fn()
    sync(device)
    out = []
    for _ in range(reps):
        if device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return out


def graphed(fn, device: str):
    """``fn`` captured in a CUDA graph (a replay closure); ``fn`` itself on a CPU."""
    if not device.startswith("cuda"):
        return fn
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def summary(times: list[float]) -> dict:
    return {"median_s": statistics.median(times), "min_s": min(times), "reps": len(times)}


def shapes(name: str, step_set: str, weights: str) -> tuple[list, list, list]:
    """(prefill, decode, mixed) shapes of a model in a set, for these weights."""
    if step_set == "mixed":
        return [], MIXED_DECODE[name], MIXED[name]
    if step_set == "int4":
        if weights == "int4":
            return INT4_PREFILL, INT4_DECODE, []
        return [], FP8_MORE_DECODE, []
    if weights == "fp8":
        return FP8_PREFILL, FP8_DECODE, []
    return PREFILL[name], DECODE[name], []


def measure_model(name: str, args, weights: str, log) -> list[dict]:
    cfg = json.loads((MODELS_DIR / f"{name}.json").read_text())
    dims = Dims.from_config(cfg, args.tiny)
    dev, dt = args.device, torch.bfloat16
    model = Decoder(dims, dev, dt, weights, seed=0)
    backends, attention = attention_setup(model)
    gen = torch.Generator(device=dev).manual_seed(1)
    rows = []
    prefill, decode, mixed = shapes(name, args.set, weights)
    if args.quick:
        prefill, decode, mixed = prefill[:2], decode[:3], mixed[:2]
    for b, s in prefill:
        tokens = torch.randint(0, dims.vocab, (b, s), device=dev, generator=gen)
        with torch.inference_mode(), sdpa_kernel(backends or ALL_BACKENDS):
            step = graphed(partial(model.prefill, tokens), dev)
            t = summary(time_fn(step, dev, args.reps))
            if dev.startswith("cuda") and b * s <= 512:
                t["eager_s"] = statistics.median(
                    time_fn(partial(model.prefill, tokens), dev, args.reps)
                )
        rows.append({"model": name, "weights": weights, "kind": "prefill", "batch": b,
                     "tokens": s, "attention": attention, **t})  # fmt: skip
        log(rows[-1])
        del step
    for b, c in decode:
        cache = model.new_cache(b, c)
        tokens = torch.randint(0, dims.vocab, (b,), device=dev, generator=gen)
        with torch.inference_mode(), sdpa_kernel(backends or ALL_BACKENDS):
            step = graphed(partial(model.decode, tokens, cache, c - 1), dev)
            t = summary(time_fn(step, dev, args.reps))
            if dev.startswith("cuda") and b <= 8 and c <= 1024:
                t["eager_s"] = statistics.median(
                    time_fn(partial(model.decode, tokens, cache, c - 1), dev, args.reps)
                )
        rows.append({"model": name, "weights": weights, "kind": "decode", "batch": b,
                     "context": c, "attention": attention, **t})  # fmt: skip
        log(rows[-1])
        del step, cache
        if dev.startswith("cuda"):
            torch.cuda.empty_cache()
    for b, c, s in mixed:
        cache, chunk_cache = model.new_cache(b, c), model.new_cache(1, s)
        tokens = torch.randint(0, dims.vocab, (b,), device=dev, generator=gen)
        chunk = torch.randint(0, dims.vocab, (1, s), device=dev, generator=gen)
        run = partial(model.mixed, tokens, cache, c - 1, chunk, chunk_cache)
        with torch.inference_mode(), sdpa_kernel(backends or ALL_BACKENDS):
            step = graphed(run, dev)
            t = summary(time_fn(step, dev, args.reps))
        rows.append({"model": name, "weights": weights, "kind": "mixed", "batch": b,
                     "context": c, "chunk": s, "attention": attention, **t})  # fmt: skip
        log(rows[-1])
        del step, run, cache, chunk_cache
        if dev.startswith("cuda"):
            torch.cuda.empty_cache()
    return rows


def ceilings(device: str, reps: int) -> dict:
    """Matrix-product rate and copy bandwidth this part reaches, in this run."""
    if not device.startswith("cuda"):
        return {}
    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    out = {
        "bf16_matmul_flops_per_s": 2
        * n**3
        / statistics.median(time_fn(partial(torch.matmul, a, b), device, reps))
    }
    try:
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=device)
        t = time_fn(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one,
                                             out_dtype=torch.bfloat16), device, reps)  # fmt: skip
        out["fp8_matmul_flops_per_s"] = 2 * n**3 / statistics.median(t)
    except (RuntimeError, AttributeError) as e:
        out["fp8_error"] = str(e)[:200]
    src = torch.empty(4 * 2**30, device=device, dtype=torch.uint8)
    dst = torch.empty_like(src)
    t = statistics.median(time_fn(partial(dst.copy_, src), device, reps))
    out["copy_read_plus_write_bytes_per_s"] = 2 * src.numel() / t
    del a, b, src, dst
    torch.cuda.empty_cache()
    return out


def environment(device: str) -> dict:
    env = {"torch": torch.__version__, "python": platform.python_version(), "device": device}
    if device.startswith("cuda"):
        p = torch.cuda.get_device_properties(0)
        env.update(gpu=p.name, memory_bytes=p.total_memory, sms=p.multi_processor_count,
                   cuda=torch.version.cuda)  # fmt: skip
        try:
            q = "driver_version,clocks.max.sm,clocks.max.mem,power.limit"
            env["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20,
            ).stdout.strip()  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            pass
    return env


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="llama-3.1-8b,qwen3-32b")
    p.add_argument("--fp8", default="llama-3.1-8b", help="models also run with fp8 weights")
    p.add_argument("--device", default="cuda")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--set", choices=("main", "mixed", "int4"), default="main",
                   help="main: prefill and decode sweeps (and fp8); mixed: chunked-prefill "
                   "steps with their pure decode steps; int4: weight-only int4 steps of the "
                   "--fp8 models (and fp8 decode batches main lacks)")  # fmt: skip
    p.add_argument("--tiny", action="store_true", help="shrunken model (a CPU check)")
    p.add_argument("--quick", action="store_true", help="the first shapes only")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    for name in args.models.split(","):
        if name not in PREFILL:
            p.error(f"--models: {name!r} has no shapes here; choose from {', '.join(PREFILL)}")
    result = {"environment": environment(args.device), "ceilings": {}, "steps": [], "errors": []}

    def save() -> None:
        args.out.write_text(json.dumps(result, indent=1))

    def log(row: dict) -> None:
        print(json.dumps(row), flush=True)
        result["steps"].append(row)
        save()

    torch.backends.cuda.matmul.allow_tf32 = False
    result["decode_vs_prefill_max_abs_logit_diff"] = decode_matches_prefill(args.device)
    result["mixed_vs_parts_max_abs_logit_diff"] = mixed_matches_parts(args.device)
    result["ceilings"] = ceilings(args.device, args.reps)
    print(json.dumps(result["ceilings"]), flush=True)
    quantized = [m for m in args.fp8.split(",") if m and args.device.startswith("cuda")]
    runs = [(m, "bf16") for m in args.models.split(",")]
    if args.set == "main":
        runs += [(m, "fp8") for m in quantized]
    elif args.set == "int4":
        runs = [(m, w) for m in quantized for w in ("int4", "fp8")]
    for name, weights in runs:
        try:
            measure_model(name, args, weights, log)
        except Exception as e:  # keep what was measured; say what failed
            result["errors"].append(f"{name} {weights}: {type(e).__name__}: {e}"[:500])
            print(result["errors"][-1], file=sys.stderr, flush=True)
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
