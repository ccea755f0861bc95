"""Admission rules: when a waiting request may start (``SchedulerConfig.admission``).

- ``current-use`` (vLLM): a request starts when the KV blocks its first chunk needs are free
  now; running requests take further blocks as they grow, and when none is free the newest is
  preempted and recomputes later (vLLM v1 ``vllm/v1/core/sched/scheduler.py``, v0.12).
- ``reserve-full-output`` (TensorRT-LLM's default capacity policy ``GUARANTEED_NO_EVICT``): a
  request starts only when the blocks for its whole sequence (prompt + maximum output) are free
  after every running request's blocks to completion are counted, so nothing is ever evicted
  (``cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp`` ``GuaranteedNoEvictScheduler``:
  ``reservedBlocks`` sums ``getRemainingBlocksToCompletion`` of the requests in progress, a
  pending request is scheduled while its own remaining blocks fit in what is left;
  ``tensorrt_llm/llmapi/llm_args.py`` ``SchedulerConfig.capacity_scheduler_policy`` default,
  v0.17 and v1.0). Simulated by taking those blocks at admission (a running request then never
  needs one), which is the same count; the last position's KV is never written, so the
  reservation is prompt + maximum output - 1 tokens, as the ``static`` policy's.
- ``sglang-new-token-ratio`` (SGLang's ``PrefillAdder``): a request starts when its remaining
  prompt plus its clipped remaining output is below the free KV minus an estimate of what the
  running requests will still write, each running request's clipped remaining output times
  ``new_token_ratio`` (:class:`NewTokenRatio`); requests admitted in the same step are charged
  their clipped output in full. KV itself is taken as with ``current-use`` and a decode step
  short of KV preempts (SGLang: retracts) and recomputes. Source:
  ``python/sglang/srt/managers/schedule_policy.py`` ``PrefillAdder.__init__`` /
  ``_get_running_request_total_token_offset`` / ``add_one_req`` (``total_tokens >=
  rem_total_tokens`` stops admission) / ``add_chunked_req`` (v0.4-v0.5),
  ``CLIP_MAX_NEW_TOKENS_ESTIMATION`` = 4096.
- ``sglang-ignore-eos`` (SGLang's ``PrefillAdder.add_one_req_ignore_eos``, which ``add_one_req``
  takes for a request sent with ``ignore_eos`` when the server runs without its radix cache,
  ``--disable-radix-cache``: ``tree_cache.disable``): a request starts when its remaining prompt
  is at most the free KV less the ``new_token_ratio`` reserve above, and when, with every running
  request's and its own whole remaining output reserved (ratio 1 for ``ignore_eos`` requests)
  and the requests taken in order of their remaining output, each one can finish: for the i-th
  of n, the free KV less its prompt, plus the KV (prompt + output so far) of the i - 1 that
  finish before it, less its remaining output times the n - i + 1 requests still running, stays
  above ``IGNORE_EOS_RESERVE_TOKENS`` (1) per running request (:meth:`NewTokenRatio.fits`).
  Source: ``python/sglang/srt/managers/schedule_policy.py`` ``add_one_req`` /
  ``add_one_req_ignore_eos`` (v0.5.9, as copied in ``40349/sglang-v.0.5.9``). Every benchmark
  client of the shipped rows sends ``ignore_eos`` (fixed output lengths). Retraction and the
  ratio's updates are as under ``sglang-new-token-ratio``.

Beside any rule, TensorRT-LLM's attention-DP context balance (:class:`AdpBalance`,
``SchedulerConfig.adp_ranks`` > 1) or its batch waiting (:class:`BatchWait`,
``SchedulerConfig.batch_wait_timeout_iters`` > 0) may hold every waiting request for some
iterations.
"""

from __future__ import annotations

import math
from operator import itemgetter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infercast.sched.request import Request
    from infercast.sched.scheduler import Scheduler, SchedulerConfig


class NewTokenRatio:
    """SGLang's ``new_token_ratio`` and the KV room its admission leaves.

    ``python/sglang/srt/managers/scheduler.py`` ``Scheduler.__init__`` (v0.4-v0.5):
    init = min(``SGLANG_INIT_NEW_TOKEN_RATIO`` 0.7 x ``schedule_conservativeness`` 1.0, 1),
    min = min(init x ``SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR`` 0.14, 1), decay = (init - min) /
    ``SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS`` 600 (``python/sglang/global_config.py``). Each decode
    step whose KV suffices lowers it by ``decay`` down to min (``update_running_batch``); a step
    that must retract sets it to min(1, (tokens decoded by the requests kept + 20 x their number)
    / their summed maximum outputs) (``ScheduleBatch.retract_decode``, ``retract_decode_steps`` =
    20); an idle engine re-inits it (``event_loop_normal``: ``self.new_token_ratio =
    self.init_new_token_ratio`` when no batch runs).

    The value is ``max(base - steps x decay, min)`` with ``steps`` counted since ``base`` was set,
    so k decode steps applied at once give the same number as k applied one by one.
    """

    __slots__ = ("init", "min", "decay", "clip", "retract_steps", "base", "steps", "ignore_eos")

    def __init__(self, cfg: SchedulerConfig):
        # ``sglang-ignore-eos``: ``add_one_req_ignore_eos`` decides admission (module docstring)
        self.ignore_eos = cfg.admission == "sglang-ignore-eos"
        self.init = min(cfg.new_token_ratio_init, 1.0)
        self.min = min(self.init * cfg.new_token_ratio_min_factor, 1.0)
        self.decay = (self.init - self.min) / cfg.new_token_ratio_decay_steps
        self.clip = cfg.clip_max_new_tokens
        self.retract_steps = cfg.retract_decode_steps
        self.base = self.init
        self.steps = 0

    @property
    def value(self) -> float:
        """The ratio now."""
        return self.at(0)

    def at(self, more_steps: int) -> float:
        """The ratio after ``more_steps`` further decode steps."""
        return max(self.base - (self.steps + more_steps) * self.decay, self.min)

    def reset(self) -> None:
        self.base, self.steps = self.init, 0

    def after_schedule(self, s: Scheduler, entries, preempted) -> None:
        """Update the ratio for the step just scheduled: retraction sets it, a decode-only step
        decays it (a step that prefills leaves it)."""
        if preempted:
            decoded = max_out = 0
            for req in s.running.values():
                out = req.num_output_tokens + (s.dstep - req.dbase if req.dbase >= 0 else 0)
                decoded += out
                max_out += req.max_output_tokens
            kept = len(s.running)
            self.base = min(1.0, (decoded + self.retract_steps * kept) / max_out) if kept else 1.0
            self.steps = 0
            return
        for req, n in entries:
            if n != 1 or req.num_computed_tokens + 1 < req.prompt_tokens + req.num_output_tokens:
                return  # a prefill step
        if s.running:
            self.steps += 1

    def output_estimate(self, req: Request) -> int:
        """A waiting request's clipped remaining output (``add_one_req``)."""
        left = req.max_output_tokens - req.num_output_tokens
        return left if left < self.clip else self.clip

    def running_reserve(self, s: Scheduler, more_steps: int = 0) -> float:
        """Tokens reserved for the running requests' remaining output after ``more_steps``
        decode-group steps: each decoding request's clipped remaining output times the ratio
        (``_get_running_request_total_token_offset``). Prompts still being prefilled are not in
        SGLang's running batch; their output is charged by :meth:`step_reserve` when their last
        chunk is scheduled."""
        clip = self.clip
        d = s.dstep + more_steps
        if s._fmax - d <= clip:  # no member's remaining output is clipped: their sum, kept
            total = s._fsum - len(s.group) * d
        else:
            total = 0
            for req in s.group.values():
                left = req.finish_dstep - d
                total += left if left < clip else clip
        for req in s.explicit.values():
            if req.num_computed_tokens + 1 >= req.prompt_tokens + req.num_output_tokens:
                left = req.max_output_tokens - req.num_output_tokens
                total += left if left < clip else clip
        return total * self.at(more_steps)

    def step_reserve(self, entries) -> int:
        """Output charged in full for prompts whose last chunk this step holds (``add_chunked_req``
        / ``add_one_req`` call ``_update_prefill_budget`` with the clipped ``max_new_tokens``; a
        truncated chunk charges none)."""
        total = 0
        for req, n in entries.values():
            if req.num_computed_tokens + n == req.prompt_tokens + req.num_output_tokens and (
                n > 1 or req.num_computed_tokens < req.prompt_tokens
            ):
                total += self.output_estimate(req)
        return total

    def fits(self, s: Scheduler, req: Request, extend: int, reserved: float) -> bool:
        """Whether ``req``, with ``extend`` prompt tokens left to compute, passes
        ``add_one_req``'s check against the free KV (tokens) less ``reserved``, or under
        ``sglang-ignore-eos`` :meth:`fits_ignore_eos`."""
        free = s.kv.num_free_blocks * s.config.block_size
        if self.ignore_eos:
            return self.fits_ignore_eos(s, req, extend, free, reserved)
        return extend + self.output_estimate(req) < free - reserved

    @staticmethod
    def fits_ignore_eos(
        s: Scheduler, req: Request, extend: int, free: int, reserved: float
    ) -> bool:
        """``add_one_req_ignore_eos`` (module docstring). The sim's free KV already excludes the
        prompts admitted earlier in the step, which SGLang subtracts as ``cur_rem_token_offset``.
        SGLang lists the request, then the running batch, then the step's admitted requests (a
        chunked prompt in progress first) and sorts them stably by remaining output; here the
        running batch is the running requests that decode, in admission order."""
        bs = s.config.block_size
        extend = -(-extend // bs) * bs
        if extend > free - reserved:  # > min(cur_rem_tokens, rem_total_tokens)
            return False
        d = s.dstep
        out = req.max_output_tokens - req.num_output_tokens
        states = [(out, req.prompt_tokens + req.num_output_tokens)] if out > 0 else []
        later = []
        for r in s.running.values():
            if r.dbase >= 0:  # a group member: its counts are lazy (decode_group.py)
                left = r.finish_dstep - d
                states.append((left, r.prompt_tokens + r.max_output_tokens - left))
                continue
            left = r.max_output_tokens - r.num_output_tokens
            occupied = r.prompt_tokens + r.num_output_tokens
            if r.num_computed_tokens + 1 >= occupied:  # decoding: in the running batch
                states.append((left, occupied))
            else:  # prefilling: in the step's can_run_list
                later.append((left, occupied))
        states += later
        states = [x for x in states if x[0] > 0]
        states.sort(key=itemgetter(0))  # stable: ties keep their order, as in SGLang
        rem = free - extend
        freed = 0
        n = len(states)
        for i, (left, occupied) in enumerate(states):
            still = n - i
            if rem + freed - left * still <= IGNORE_EOS_RESERVE_TOKENS * still:
                return False
            freed += occupied
        return True


IGNORE_EOS_RESERVE_TOKENS = 1  # schedule_policy.py (v0.5.9): tokens kept per running request


class AdpBalance:
    """TensorRT-LLM's attention-DP context balance (``attention_dp_config.enable_balance``).

    With attention data parallel every rank runs each iteration together (the MoE exchange), so
    TensorRT-LLM can hold new (context) requests until every rank has one and run them in one
    iteration. Its rule, per iteration (``tensorrt_llm/_torch/pyexecutor/py_executor.py``
    ``PyExecutor._balance_adp_requests``, v1.1-v1.2; the design: ``docs/source/blogs/tech_blog/
    blog10_ADP_Balance_Strategy.md``): when every rank has a context request (and a free slot) the
    waiting counter resets and, if every rank also has generation requests, the contexts wait
    ``batching_wait_iters`` more iterations first; otherwise the counter counts every iteration
    (whether or not a request waits) and the contexts are held until it reaches ``timeout_iters``
    (then it resets) or some rank has no generation request. So a lone new request waits for the
    counter's next wrap: up to ``timeout_iters`` iterations, about half of that on average.

    The simulator runs the ranks as one scheduler, without rank labels: TensorRT-LLM routes each
    new request to the rank with the fewest active requests, which in a closed loop is the rank
    whose request just finished, a rank at random. So "every rank has a context request" is
    taken as "as many requests wait as it takes, on average, for R ranks drawn at random to
    cover all R": R (1 + 1/2 + ... + 1/R) (the coupon collector's mean; 22 for 8 ranks, 9 for 4,
    3 for 2); and "a rank without generation requests" as "no request decodes". The counter is
    the group's step count (``dstep``) since the last reset, so k decode steps run at once
    count as k iterations.
    """

    __slots__ = ("ranks", "timeout", "batching", "base", "full_since")

    def __init__(self, cfg: SchedulerConfig):
        r = cfg.adp_ranks
        self.ranks = math.ceil(r * sum(1 / i for i in range(1, r + 1)) - 1e-9)
        self.timeout = cfg.adp_timeout_iters
        self.batching = cfg.adp_batching_wait_iters
        self.base = 0  # the decode step at which the waiting counter last reset
        self.full_since: int | None = None  # step from which every rank has had a context

    def holds(self, sched: Scheduler) -> bool:
        """Whether this iteration holds the waiting requests (and updates the counters)."""
        d = sched.dstep
        if not sched.waiting or not sched.group:  # nothing to hold, or a rank without decodes
            if not sched.group:  # the counter resets; the next step (a group step) counts 1
                self.base, self.full_since = d - 1, None
            return False
        if len(sched.waiting) >= self.ranks:  # every rank has a context request
            self.base = d
            if self.full_since is None:
                self.full_since = d
            if d - self.full_since < self.batching:
                return True
            self.full_since = None
            return False
        count = d - self.base
        if count > 0 and count % self.timeout == 0:  # the counter reaches the timeout
            self.base = d
            return False
        return True

    def held_steps(self, sched: Scheduler) -> int:
        """How many coming decode steps certainly hold the waiting requests (0: the next one may
        start them), for ``decode_horizon``; arrivals cut a horizon, so the waiting count stays."""
        d = sched.dstep
        if len(sched.waiting) >= self.ranks:
            if self.full_since is None:  # this step starts the batching wait, as ``holds`` would
                self.full_since = d
            return max(self.batching - (d - self.full_since), 0)
        count = d - self.base
        if count > 0 and count % self.timeout == 0:
            return 0
        return self.timeout - count % self.timeout


class BatchWait:
    """TensorRT-LLM's batch waiting (``batch_wait_timeout_iters``, ``batch_wait_max_tokens_ratio``).

    ``tensorrt_llm/_torch/pyexecutor/py_executor.py`` (v1.1-v1.2) ``PyExecutor._schedule``: without
    attention DP, when an iteration's scheduled batch holds context requests and generation
    requests, ``_waiting_requests`` drops the context requests from it unless the waiting counter
    has reached ``batch_wait_timeout_iters`` or the batch's tokens (every scheduled context
    request's whole prompt, ``len(get_tokens(0))``, plus one per generation request) reach
    ``batch_wait_max_tokens_ratio`` x ``max_num_tokens``; the counter counts each iteration that
    holds them and resets when they go. So new prompts gather until they fill that share of the
    token budget or ``timeout`` iterations pass; with no generation request nothing waits.

    Simulated with the scheduler's token budget as ``max_num_tokens``, the decode group as the
    generation requests, and as the scheduled context requests the waiting ones, in order, while
    their prompts fit the budget the decodes leave and seats are free (the micro-batch
    scheduler's cut). The counter is the group's step count since the wait began, so k decode
    steps run at once count as k iterations (as :class:`AdpBalance`).
    """

    __slots__ = ("timeout", "threshold", "since")

    def __init__(self, cfg: SchedulerConfig):
        self.timeout = cfg.batch_wait_timeout_iters
        self.threshold = cfg.batch_wait_max_tokens_ratio * cfg.max_num_batched_tokens
        self.since: int | None = None  # the group step at which the waiting counter last reset

    def _tokens(self, sched: Scheduler) -> int:
        """The tokens ``_waiting_requests`` counts this iteration."""
        gen = len(sched.group)
        budget = sched.config.max_num_batched_tokens - gen
        seats = sched.config.max_num_seqs - len(sched.running)
        total = 0
        for req in sched.waiting:
            prompt = req.prompt_tokens + req.num_output_tokens
            if seats <= 0 or (total and total + prompt > budget):
                break
            total += prompt
            seats -= 1
        return total + gen

    def holds(self, sched: Scheduler) -> bool:
        """Whether this iteration holds the waiting requests (and updates the counter)."""
        if not sched.waiting or not sched.group:  # no context or no generation request
            return False
        d = sched.dstep
        if self.since is None:
            self.since = d
        if d - self.since >= self.timeout or self._tokens(sched) >= self.threshold:
            self.since = None
            return False
        return True

    def held_steps(self, sched: Scheduler) -> int:
        """How many coming decode steps certainly hold the waiting requests (0: the next one may
        start them), for ``decode_horizon``; arrivals cut a horizon, so the waiting set stays."""
        if self._tokens(sched) >= self.threshold:
            return 0
        if self.since is None:  # this step starts the wait, as ``holds`` would
            self.since = sched.dstep
        return max(self.timeout - (sched.dstep - self.since), 0)
