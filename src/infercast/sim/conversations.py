"""Multi-turn conversations: sessions of turns with think time, each prompt the whole history.

A session is a list of turns ``(new_tokens, output_tokens, think_s)``. Turn k's
prompt is every earlier message and answer plus its own new message::

    prompt_k = sum_{j<k} (new_j + output_j) + new_k

so consecutive turns share a growing prefix, which the scheduler's prefix cache
reuses when ``prefix_caching`` is on: a turn's KV blocks (prompt and answer) are
registered under hashes that depend only on (session, block index), exactly what
chained content hashes of one growing token stream give. Turn k + 1 is sent
``think_s`` seconds after turn k's last token (a closed loop per session).

Sources (``workload.conversations``):

- ``builtin``: the sessions chained from Mooncake's FAST'25 conversation trace
  (Kimi, one hour, 8,056 sessions, 1.49 turns per session on average;
  ``data/conversations/README.md``). Sessions are drawn whole, with replacement;
  the pause before a follow-up is the gap between the two turns' arrivals in the
  trace (it includes the original service's answer time, so it overstates the
  think time by that).
- ``synthetic``: every session has ``turns`` turns, messages and answers from the
  workload's input/output length settings, pauses of ``think_time_s``.
- a CSV file with the shipped file's columns (``session, turn, arrival_s,
  new_input_tokens, output_tokens``; optional ``think_s``, the pause before the
  turn, instead of the gap between arrivals), its sessions replayed in file
  order (cycling when more are asked for). ``bench`` writes one for
  ``--compare-sim``, so the simulator replays the measured sessions.

``turns``, ``think_time_s`` and explicit input/output lengths override the
source's (a builtin session then takes its first turn and draws its follow-ups
from all follow-up turns of the trace). ``num_requests`` counts sessions; their
starts follow the run's arrival process (Poisson or gamma at ``rate`` sessions/s,
all at once offline, or ``concurrency`` users each running sessions back to back).
A turn that is rejected or fails ends its session, as does one whose prompt and
answer would pass ``max_model_len``. ``prefix_groups``/``prefix_tokens`` give the
sessions shared system prompts: a session's first ``prefix_tokens`` tokens (part of
its first message) are one of ``prefix_groups`` common prefixes, cached across
sessions, as a chat template's default system prompt is.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from infercast.errors import ConfigError, DataError
from infercast.metrics.records import RequestRecord
from infercast.sched import Request, synthetic_block_hashes
from infercast.sim.collect import BufferedDriver
from infercast.sim.kernel import PRIO_ARRIVAL, Kernel
from infercast.sim.workload import sample_lengths
from infercast.specs.catalog import data_path

BUILTIN = "builtin"
SYNTHETIC = "synthetic"
BUILTIN_FILE = "mooncake-fast25-conversation.csv"
_COLUMNS = ("session", "turn", "arrival_s", "new_input_tokens", "output_tokens")


@dataclass(frozen=True)
class SessionTable:
    """Recorded sessions, turn rows grouped by session (``start[i]:start[i+1]`` is session i)."""

    name: str
    start: np.ndarray  # int64, len = sessions + 1
    new_tokens: np.ndarray  # int64 per turn row
    output_tokens: np.ndarray  # int64 per turn row
    gap_s: (
        np.ndarray
    )  # float64 per turn row: the pause before it (think_s, else the arrival gap; 0: first)

    @property
    def num_sessions(self) -> int:
        return int(self.start.size - 1)

    def turns_per_session(self) -> np.ndarray:
        return np.diff(self.start)


def load_sessions(name_or_path: str) -> SessionTable:
    """The shipped sessions (``builtin``) or a CSV with columns :data:`_COLUMNS`."""
    if name_or_path == BUILTIN:
        text = data_path("conversations", BUILTIN_FILE).read_text()
        return _parse(BUILTIN, text.splitlines())
    path = Path(name_or_path)
    if not path.is_file():
        raise ConfigError(
            f"conversations {name_or_path!r}: not 'builtin', 'synthetic' nor a CSV file"
        )
    with path.open(newline="") as fh:
        return _parse(name_or_path, list(fh))


def _parse(name: str, lines: list[str]) -> SessionTable:
    reader = csv.DictReader(lines)
    missing = [c for c in _COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise DataError(
            f"conversations {name}: missing columns {missing} (need {', '.join(_COLUMNS)})"
        )
    rows = []
    for i, r in enumerate(reader, start=2):
        try:
            rows.append(
                (
                    str(r["session"]),
                    int(r["turn"]),
                    float(r["arrival_s"]),
                    int(r["new_input_tokens"]),
                    int(r["output_tokens"]),
                    float(r["think_s"]) if r.get("think_s") not in (None, "") else None,
                )
            )
        except (TypeError, ValueError) as exc:
            raise DataError(f"conversations {name}: line {i}: {exc}") from None
        if rows[-1][3] < 1 or rows[-1][4] < 1:
            raise DataError(f"conversations {name}: line {i}: token counts must be >= 1")
    if not rows:
        raise DataError(f"conversations {name}: no rows")
    order: dict[str, list[tuple]] = {}
    for row in rows:
        order.setdefault(row[0], []).append(row)
    new, out, gap, start = [], [], [], [0]
    for turns in order.values():
        turns.sort(key=lambda t: t[1])
        prev = turns[0][2]
        for j, t in enumerate(turns):
            new.append(t[3])
            out.append(t[4])
            gap.append(0.0 if j == 0 else t[5] if t[5] is not None else max(t[2] - prev, 0.0))
            prev = t[2]
        start.append(len(new))
    return SessionTable(
        name,
        np.array(start, dtype=np.int64),
        np.array(new, dtype=np.int64),
        np.array(out, dtype=np.int64),
        np.array(gap, dtype=np.float64),
    )


@dataclass(frozen=True)
class ConversationSpec:
    """How sessions are drawn (built from the validated workload config)."""

    source: str  # builtin | synthetic | a CSV path
    turns: int | None = None
    think_time_s: float | None = None
    input_dist: str | None = None  # None: the source's message lengths
    input_mean: float = 0.0
    input_std: float = 0.0
    output_dist: str | None = None
    output_mean: float = 0.0
    output_std: float = 0.0
    max_model_len: int | None = None


class SessionSampler:
    """Draws sessions as lists of ``(new_tokens, output_tokens, think_s)`` turns, seeded."""

    def __init__(self, spec: ConversationSpec, rng: np.random.Generator):
        self.spec, self.rng = spec, rng
        self.table = None if spec.source == SYNTHETIC else load_sessions(spec.source)
        self.in_order = spec.source not in (SYNTHETIC, BUILTIN)  # a file's sessions replay in order
        self._next = 0
        if self.table is not None:
            t = self.table
            first = t.start[:-1]
            self._follow = np.setdiff1d(np.arange(t.new_tokens.size), first)
            if spec.turns is not None and spec.turns > 1 and not self._follow.size:
                raise DataError(f"conversations {t.name}: no follow-up turns to draw `turns` from")
        elif spec.turns is None or spec.input_dist is None or spec.output_dist is None:
            raise ConfigError(
                "synthetic conversations need `turns`, `input_tokens` and `output_tokens`"
            )

    def session(self) -> list[tuple[int, int, float]]:
        spec, rng, t = self.spec, self.rng, self.table
        rows: np.ndarray | None
        if t is None:
            assert spec.turns is not None  # __init__ refuses synthetic sessions without --turns
            rows = None
            n = spec.turns
        elif spec.turns is None:  # a recorded session, whole
            i = self._next % t.num_sessions if self.in_order else int(rng.integers(t.num_sessions))
            self._next += 1
            rows = np.arange(t.start[i], t.start[i + 1])
            n = rows.size
        else:  # a recorded first turn, follow-ups drawn from every recorded follow-up
            rows = np.empty(spec.turns, dtype=np.int64)
            rows[0] = t.start[int(rng.integers(t.num_sessions))]
            rows[1:] = self._follow[rng.integers(0, self._follow.size, spec.turns - 1)]
            n = spec.turns
        new = self._lengths(
            spec.input_dist,
            spec.input_mean,
            spec.input_std,
            n,
            None if t is None or rows is None else t.new_tokens[rows],
        )
        out = self._lengths(
            spec.output_dist,
            spec.output_mean,
            spec.output_std,
            n,
            None if t is None or rows is None else t.output_tokens[rows],
        )
        if spec.think_time_s is not None:
            think = np.full(n, float(spec.think_time_s))
        else:
            assert t is not None and rows is not None  # synthetic sessions state --think-time-s
            think = t.gap_s[rows]
        think[0] = 0.0
        return self._fit(list(zip(new.tolist(), out.tolist(), think.tolist(), strict=True)))

    def _lengths(self, dist, mean, std, n, recorded):
        if dist is None or dist == "trace":
            return recorded
        return sample_lengths(dist, mean, std, 1, None, self.rng, n)

    def _fit(self, turns: list[tuple[int, int, float]]) -> list[tuple[int, int, float]]:
        """The session up to the last turn whose prompt and answer fit ``max_model_len``."""
        limit = self.spec.max_model_len
        if limit is None:
            return turns
        kept: list[tuple[int, int, float]] = []
        history = 0
        for new, out, think in turns:
            if kept and history + new + out > limit:
                break  # the user hit the context limit: the session ends
            kept.append((new, out, think))
            history += new + out
        return kept


def session_prompts(turns: list[tuple[int, int, float]]) -> list[tuple[int, int]]:
    """``(prompt_tokens, output_tokens)`` per turn: each prompt is the history plus its message."""
    out, history = [], 0
    for new, answer, _ in turns:
        out.append((history + new, answer))
        history += new + answer
    return out


class _Session:
    __slots__ = ("index", "turns", "k", "history", "hashes", "user")

    def __init__(self, index: int, turns: list[tuple[int, int, float]], user: int):
        self.index, self.turns, self.user = index, turns, user
        self.k = 0  # the next turn
        self.history = 0  # tokens of every earlier message and answer
        self.hashes: list[int] = []


class ConversationDriver(BufferedDriver):
    """Feeds sessions to the router turn by turn; the simulator's driver for conversations.

    Same surface as ``sim.run``'s driver (``replicas``, ``start``/``run``, ``emit``, ``add``,
    ``completions``, ``itl``, ``closed``): completions come back here (``closed`` is True) and the
    session's next turn is scheduled ``think_s`` after its last token.
    """

    closed = True

    def __init__(
        self,
        cfg,
        spec: ConversationSpec,
        replicas: list,
        kernel: Kernel,
        on_record: Callable[[RequestRecord], None],
        rng: np.random.Generator,
    ):
        from infercast.sim.router import make_router

        w = cfg.workload
        self.replicas, self.kernel, self.on_record = replicas, kernel, on_record
        self.router = make_router(cfg.router)
        self.block_size = cfg.scheduler.block_size
        self.sampler = SessionSampler(spec, rng)
        self.rng = rng
        self.arrival, self.rate, self.cv = w.resolved_arrival, w.rate, w.cv
        self.concurrency = w.concurrency or 0
        self.num_sessions = w.num_requests
        # Shared system prompts: every session's first prefix_tokens tokens (counted in its first
        # message) are one of prefix_groups common prefixes.
        self.prefix_groups, self.prefix_tokens = w.prefix_groups, w.prefix_tokens
        self._shared: dict[int, list[int]] = {}
        self.itl = None
        self._started = 0
        self._live: dict[str, _Session] = {}  # request id -> its session
        self._count = 0
        self.num_turns = 0
        self.num_sessions_cut = 0  # sessions ended early by a rejected or failed turn

    # ---- session starts ------------------------------------------------------------
    def start(self) -> None:
        if self.arrival == "closed":
            for user in range(min(self.concurrency, self.num_sessions)):
                self._start_session(0.0, user)
            return
        n = self.num_sessions
        if self.arrival == "offline":
            starts = np.zeros(n)
        elif self.arrival == "poisson":
            starts = np.cumsum(self.rng.exponential(1.0 / self.rate, n))
            starts -= starts[0]
        elif self.arrival == "gamma":
            shape = 1.0 / self.cv**2
            starts = np.cumsum(self.rng.gamma(shape, 1.0 / (self.rate * shape), n))
            starts -= starts[0]
        else:
            raise ConfigError(
                f"conversations start by poisson, gamma, closed or offline arrivals, "
                f"not {self.arrival!r}"
            )
        for t in starts.tolist():
            self.kernel.at(t, PRIO_ARRIVAL, self._start_session, t, -1)

    def _start_session(self, t: float, user: int) -> None:
        if self._started >= self.num_sessions:
            return
        sess = _Session(self._started, self.sampler.session(), user)
        self._started += 1
        if self.prefix_tokens:  # a system prompt shared by the sessions of one group
            group = int(self.rng.integers(self.prefix_groups))
            shared = self._shared.get(group)
            if shared is None:
                shared = self._shared[group] = list(
                    synthetic_block_hashes(group, self.prefix_tokens, self.block_size)
                )
            first = min(
                self.prefix_tokens // self.block_size,
                (sess.turns[0][0] + sess.turns[0][1]) // self.block_size,
            )
            sess.hashes = shared[:first]
        self._send(sess, t)

    def _send(self, sess: _Session, at: float) -> None:
        new, out, _ = sess.turns[sess.k]
        prompt = sess.history + new
        need = (prompt + out) // self.block_size
        hashes = sess.hashes
        while len(hashes) < need:  # block i of the session's one token stream
            hashes.append(hash(("conversation", sess.index, len(hashes))))
        rid = str(self._count)
        self._count += 1
        self.num_turns += 1
        self._live[rid] = sess
        req = Request(rid, prompt, out, at, tuple(hashes[:need]))
        replicas = self.replicas
        target = (
            replicas[0] if len(replicas) == 1 else replicas[self.router.route(sess.index, replicas)]
        )
        target.submit(req)

    def _next_turn(self, rid: str, ok: bool) -> None:
        sess = self._live.pop(rid)
        now = self.kernel.now
        new, out, _ = sess.turns[sess.k]
        sess.history += new + out
        sess.k += 1
        if ok and sess.k < len(sess.turns):
            self.kernel.at(
                now + sess.turns[sess.k][2],
                PRIO_ARRIVAL,
                self._send,
                sess,
                now + sess.turns[sess.k][2],
            )
            return
        if not ok and sess.k < len(sess.turns):
            self.num_sessions_cut += 1
        if sess.user >= 0:  # a closed-loop user starts the next session
            self._start_session(now, sess.user)

    # ---- the driver surface ----------------------------------------------------------
    def run(self) -> None:
        self.start()
        self.kernel.run()

    def emit(self, rec: RequestRecord, replica: int) -> None:
        self.on_record(rec)
        self._next_turn(rec.request_id, rec.ok)

    def completed(self, req: Request) -> None:
        """The session's next turn, ``think_s`` after this one's last token."""
        self._next_turn(req.request_id, True)

    def extra(self) -> dict[str, object]:
        """Numbers for the run's result: sessions and turns."""
        return {
            "conversation_sessions": self._started,
            "conversation_turns": self.num_turns,
            "conversation_turns_per_session": self.num_turns / self._started
            if self._started
            else math.nan,
            "conversation_sessions_cut": self.num_sessions_cut,
        }


def conversation_spec(cfg) -> ConversationSpec | None:
    """The conversation spec of a validated :class:`~infercast.sim.config.SimConfig`, or None."""
    w = cfg.workload
    source = w.resolved_conversations
    if source is None:
        return None
    return ConversationSpec(
        source=source,
        turns=w.turns,
        think_time_s=w.think_time_s,
        input_dist=(w.input.dist or "fixed")
        if w.input.mean is not None or w.input.dist not in (None, "trace")
        else None,
        input_mean=w.input.mean or 0.0,
        input_std=w.input.std,
        output_dist=(w.output.dist or "fixed")
        if w.output.mean is not None or w.output.dist not in (None, "trace")
        else None,
        output_mean=w.output.mean or 0.0,
        output_std=w.output.std,
        max_model_len=cfg.scheduler.max_model_len,
    )
