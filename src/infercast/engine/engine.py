"""The engine loop: schedule -> execute -> update, on the simulator's own scheduler.

:class:`Engine` is synchronous and single-threaded; the HTTP server drives it
from a background thread (:mod:`infercast.engine.async_engine`), benchmarks and
tests call :meth:`Engine.step` directly. The scheduler
(:class:`infercast.sched.scheduler.Scheduler`) is used unchanged: it decides
who computes how many tokens on which KV blocks, this module runs the batch on
:class:`~infercast.engine.model.LlamaModel`, samples, and reports back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from threadpoolctl import ThreadpoolController

from infercast.engine.kv_store import PagedKVStore
from infercast.engine.loader import LoadedModel
from infercast.engine.model import ForwardPass, LlamaModel, SeqInput
from infercast.engine.sampling import SamplingError, SamplingParams, sample
from infercast.engine.sequence import Generation, TokenEvent
from infercast.errors import ConfigError
from infercast.metrics.records import RequestRecord
from infercast.sched.batch import Batch
from infercast.sched.kv_cache import extend_block_hashes, hash_token_blocks
from infercast.sched.request import Request
from infercast.sched.scheduler import Scheduler, SchedulerConfig
from infercast.validation import check_int, check_number

BACKENDS = ("numpy", "torch")
POLICIES = ("static", "continuous", "chunked")


def make_model(
    loaded: LoadedModel, max_positions: int, backend: str, num_threads: int
) -> ForwardPass:
    """The forward-pass object of a backend (both have ``forward(seqs, kv, all_logits)``)."""
    from infercast.engine.weights import dense_weights

    if backend == "torch":
        from infercast.engine.torch_model import TorchLlamaModel

        return TorchLlamaModel(
            loaded.cfg, dense_weights(loaded.weights), max_positions, num_threads
        )
    if loaded.weights_format != "fp32":  # compact matrices run PyTorch's kernels
        from infercast.engine.qlinear import import_torch

        import_torch().set_num_threads(num_threads)
    return LlamaModel(loaded.cfg, loaded.weights, max_positions, num_threads)


class PromptTooLongError(ConfigError):
    """A prompt that leaves no room for one output token within max_model_len."""


@dataclass(frozen=True)
class EngineConfig:
    """Engine limits; scheduler fields keep vLLM's names."""

    policy: str = "chunked"
    max_num_seqs: int = 16
    max_num_batched_tokens: int = 512
    block_size: int = 16
    kv_cache_bytes: float = 2**30  # float32 K+V of every layer (GiB = 2**30)
    max_model_len: int = 2048
    enable_prefix_caching: bool = False
    num_threads: int = 1  # BLAS threads; one is often faster on shared cores
    backend: str = "numpy"  # numpy (float32) | torch (bf16 weights, optional extra)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ConfigError(f"scheduler {self.policy!r}: use one of {', '.join(POLICIES)}")
        for flag, value in (
            ("`max_num_seqs`", self.max_num_seqs),
            ("`max_num_batched_tokens`", self.max_num_batched_tokens),
            ("block_size", self.block_size),
        ):
            check_int(value, flag, 1, fix="give a positive integer")
        check_int(self.max_model_len, "`max_model_len`", 2, fix="give at least 2 tokens")
        check_number(
            self.kv_cache_bytes,
            "KV cache bytes (`kv_cache_gib`)",
            0,
            lo_open=True,
            fix="give a positive, finite size",
        )
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend {self.backend!r}: use one of {', '.join(BACKENDS)}")
        if self.num_threads < 1:
            raise ConfigError(f"threads={self.num_threads}: use at least 1")
        if self.kv_cache_bytes <= 0 or self.max_model_len < 2:
            raise ConfigError(
                f"kv cache {self.kv_cache_bytes} bytes / max_model_len "
                f"{self.max_model_len}: both must be positive (context >= 2)"
            )

    def num_blocks(self, kv_bytes_per_token: int) -> int:
        return max(1, int(self.kv_cache_bytes // (kv_bytes_per_token * self.block_size)))


class Engine:
    """A CPU inference engine for one loaded model (see module doc)."""

    def __init__(
        self,
        loaded: LoadedModel,
        config: EngineConfig,
        clock: Callable[[], float],
        rng: np.random.Generator,
        step_observer: Callable[[Batch, float], None] | None = None,
    ) -> None:
        """``step_observer(batch, seconds)`` sees every executed step (calibration, tests)."""
        cfg = loaded.cfg
        self.step_observer = step_observer
        self.loaded = loaded
        self.config = config
        self.clock = clock
        self.rng = rng
        self.max_model_len = min(config.max_model_len, cfg.max_position_embeddings)
        num_blocks = config.num_blocks(PagedKVStore.bytes_per_token(cfg))
        self.scheduler = Scheduler(
            SchedulerConfig(
                policy=config.policy,
                max_num_seqs=config.max_num_seqs,
                max_num_batched_tokens=config.max_num_batched_tokens,
                block_size=config.block_size,
                num_blocks=num_blocks,
                enable_prefix_caching=config.enable_prefix_caching,
                max_model_len=self.max_model_len,
            )
        )
        self.kv = PagedKVStore(cfg, num_blocks, config.block_size)
        self.model = make_model(loaded, self.max_model_len, config.backend, config.num_threads)
        # One controller, built once: threadpool_limits() rescans the loaded libraries
        # on every call (~0.3 ms, measured), too much to pay per step.
        self._blas = ThreadpoolController()
        self.gens: dict[str, Generation] = {}
        # Prefix caching: each request's block hashes, extended as it decodes (the scheduler
        # registers its answer's blocks too, so a conversation's next turn reuses them).
        self._hashes: dict[str, list[int]] = {}
        self.finished: list[RequestRecord] = []  # records of every finished request, in order
        self.num_steps = 0

    # ---- requests ------------------------------------------------------------
    def add(
        self,
        request_id: str,
        prompt_ids: list[int],
        params: SamplingParams,
        arrival_s: float | None = None,
    ) -> None:
        """Queue a request; ``max_tokens`` is clipped to what fits in max_model_len."""
        self.check_prompt(len(prompt_ids), params.max_tokens)
        room = self.max_model_len - len(prompt_ids)
        if params.max_tokens > room:
            params = _with_max_tokens(params, room)
        seed_rng = (
            np.random.default_rng(params.numpy_seed)
            if params.seed is not None
            else np.random.default_rng(self.rng.integers(2**63))
        )
        arrival = self.clock() if arrival_s is None else arrival_s
        gen = Generation(
            request_id,
            prompt_ids,
            params,
            self.loaded.tokenizer,
            seed_rng,
            arrival,
            self.max_model_len,
        )
        hashes = (
            list(hash_token_blocks(prompt_ids, self.config.block_size))
            if self.config.enable_prefix_caching
            else []
        )
        req = Request(request_id, len(prompt_ids), params.max_tokens, arrival, hashes)
        if not self.scheduler.add_request(req):
            raise ConfigError(f"request {request_id} cannot run: {req.reject_reason}")
        self.gens[request_id] = gen
        if self.config.enable_prefix_caching:
            self._hashes[request_id] = hashes

    def check_prompt(self, num_prompt_tokens: int, max_tokens: int = 1) -> None:
        """Raise ConfigError unless the prompt (and its output, clipped to the context) can run.

        The same limits the scheduler rejects on, checked up front so a server
        answers 400 instead of queueing a request that can never run.
        """
        if num_prompt_tokens < 1:
            raise ConfigError("prompt is empty: send at least one token")
        if num_prompt_tokens >= self.max_model_len:
            raise PromptTooLongError(
                f"prompt has {num_prompt_tokens} tokens but the context is {self.max_model_len} "
                "tokens (prompt + at least 1 output token); shorten the prompt"
            )
        sc = self.scheduler.config
        total = min(num_prompt_tokens + max_tokens, self.max_model_len)
        if -(-(total - 1) // sc.block_size) > sc.num_blocks:
            raise ConfigError(
                f"prompt + max_tokens = {total} tokens needs more KV blocks than the engine has "
                f"({sc.num_blocks} x {sc.block_size} tokens); lower max_tokens or the prompt"
            )
        if sc.policy != "chunked" and num_prompt_tokens > sc.max_num_batched_tokens:
            raise ConfigError(
                f"prompt has {num_prompt_tokens} tokens, more than max_num_batched_tokens="
                f"{sc.max_num_batched_tokens} without chunked prefill; shorten it"
            )

    def abort(self, request_id: str, error: str | None = None) -> TokenEvent | None:
        """Stop a request and free its KV blocks; None if it already finished.

        With ``error`` the request ends as failed (finish reason ``error``, the
        message on its event) instead of aborted by its client.
        """
        gen = self.gens.pop(request_id, None)
        if gen is None:
            return None
        self.scheduler.abort(request_id)
        self._hashes.pop(request_id, None)
        ev = gen.finish("abort" if error is None else "error", self.clock(), error=error)
        self.finished.append(gen.record)
        return ev

    def pop_finished(self) -> list[RequestRecord]:
        """Records finished since the last call (a long-running server drains them)."""
        out, self.finished = self.finished, []
        return out

    def abort_all(self, error: str | None = None) -> list[TokenEvent]:
        """Abort every request (``error``: fail them with that message)."""
        return [ev for rid in list(self.gens) if (ev := self.abort(rid, error)) is not None]

    @property
    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished

    @property
    def num_waiting(self) -> int:
        return self.scheduler.num_waiting

    @property
    def num_running(self) -> int:
        return self.scheduler.num_running

    @property
    def kv_usage(self) -> float:
        return self.scheduler.kv.usage

    # ---- the loop ------------------------------------------------------------
    def step(self) -> list[TokenEvent]:
        """One step: schedule, run the batch, sample, update. Returns the tokens' events."""
        t0 = time.perf_counter()
        batch = self.scheduler.schedule()
        for rid in batch.preempted:
            self.gens[rid].record.num_preemptions += 1
        if batch.is_empty:
            return []
        start = self.clock()
        inputs = []
        for s in batch.seqs:
            gen = self.gens[s.request_id]
            if gen.record.first_scheduled_s is None:
                gen.record.first_scheduled_s = start
                req = self.scheduler.requests[s.request_id]
                gen.record.cached_prompt_tokens = req.num_cached_prompt_tokens
            stop = s.num_cached_tokens + s.num_new_tokens
            inputs.append(
                SeqInput(
                    gen.token_ids(s.num_cached_tokens, stop),
                    s.num_cached_tokens,
                    s.block_table,
                    s.samples,
                )
            )
        with self._blas.limit(limits=self.config.num_threads):
            logits = self.model.forward(inputs, self.kv)
        now = self.clock()
        self.num_steps += 1
        events, stopped = [], set()
        for s, row in zip(batch.seqs, logits, strict=True):
            if row is None:
                continue
            gen = self.gens[s.request_id]
            try:
                ev = gen.append(sample(row, gen.params, gen.rng), now)
            except SamplingError as exc:  # this request fails alone; the batch goes on
                ev = gen.finish("error", now, error=str(exc))
            events.append(ev)
            if ev.finished:
                stopped.add(s.request_id)
            hashes = self._hashes.get(s.request_id)
            if hashes is not None:
                self._grow_hashes(gen, hashes)
        for req in self.scheduler.update(batch, None, stopped):
            gen = self.gens.pop(req.request_id)
            self._hashes.pop(req.request_id, None)
            if gen.finish_reason is None:  # the scheduler's own length limit
                events.append(gen.finish(req.finish_reason or "length", now))
            self.finished.append(gen.record)
        if self.step_observer is not None:
            self.step_observer(batch, time.perf_counter() - t0)
        return events

    def _grow_hashes(self, gen: Generation, hashes: list[int]) -> None:
        """Hash the output's newly full blocks (one block of ``block_size`` tokens at a time)."""
        bs = self.config.block_size
        if (len(gen.prompt_ids) + len(gen.output_ids)) // bs > len(hashes):
            extend_block_hashes(hashes, gen.prompt_ids + gen.output_ids, bs)

    def run_until_done(self, max_steps: int | None = None) -> list[TokenEvent]:
        """Step until no request is left (tests, offline benchmarks)."""
        out: list[TokenEvent] = []
        steps = 0
        while self.has_unfinished and (max_steps is None or steps < max_steps):
            out += self.step()
            steps += 1
        return out


def _with_max_tokens(params: SamplingParams, max_tokens: int) -> SamplingParams:
    from dataclasses import replace

    return replace(params, max_tokens=max_tokens)
