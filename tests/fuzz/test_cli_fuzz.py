"""Generated bad values for every value-taking flag of every command: one line, exit 2, no
traceback.

Each flag has a kind (a count, a seed, a fraction, an output path, a name ...)
and hypothesis draws values that kind must refuse: NaN, infinities, 1e400,
negatives, zero, text where a number goes, empty strings, paths that cannot be
written. The command runs in this process with the generated value added to a
small valid command line; whatever it is, the command must end with exit
code 2 and exactly one line on stderr, ``infercast: error: ...``.

Servers (``serve``, ``mock-server``) run against a port this test holds, so a
value the command wrongly accepted ends at "port in use" instead of serving
forever; the test then still passes only if the refusal came from the value
(its message is checked not to be the port's). ``machine`` (minutes of
measurement) and the boolean switches are left out.

Examples per flag: ``FUZZ_EXAMPLES`` (derandomized, so CI runs the same cases).
"""

from __future__ import annotations

import functools
import io
import math
import os
import socket
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import infercast.cli as cli

FUZZ_EXAMPLES = int(os.environ.get("INFERCAST_FUZZ_EXAMPLES", "5"))
SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    database=None,
)

# ---- what each kind must refuse --------------------------------------------------
NONFINITE = st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400"])
NOT_A_NUMBER = st.sampled_from(["", " ", "x", "1,5", "0x10", "true", "--", "1 2", "½"])
NOT_AN_INT = NOT_A_NUMBER | NONFINITE | st.sampled_from(["1.5", "2e0", "-0.5"])


def _ints_below(lo: int) -> st.SearchStrategy[str]:
    return st.integers(max_value=lo - 1).map(str) | NOT_AN_INT


def _floats_below(lo: float, inclusive: bool) -> st.SearchStrategy[str]:
    numbers = st.floats(max_value=lo, allow_nan=False, exclude_max=not inclusive)
    if not inclusive:  # -0.0 == 0.0: it is not below 0
        numbers = numbers.filter(lambda x: x < lo)
    return numbers.map(repr) | NONFINITE | NOT_A_NUMBER


def _not_a_name() -> st.SearchStrategy[str]:
    """Text that names no preset and no file (a filter keeps real paths out)."""
    text = st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24
    )
    return text.filter(lambda s: not s.startswith("-") and not _exists(s)) | st.sampled_from(
        ["", " ", "no-such-thing", "/nonexistent/x.json", "."]
    )


def _exists(text: str) -> bool:
    try:
        return bool(text.strip()) and Path(text).expanduser().exists()
    except (OSError, ValueError):
        return False


KINDS: dict[str, st.SearchStrategy[str]] = {
    "count": _ints_below(1),  # an integer >= 1
    "nonneg_int": _ints_below(0),
    "seed": _ints_below(0) | st.integers(min_value=2**64).map(str),
    "port": _ints_below(1) | st.integers(min_value=65536).map(str),
    "positive": _floats_below(0.0, inclusive=True),
    "nonneg": _floats_below(0.0, inclusive=False),
    "fraction": _floats_below(0.0, inclusive=False)
    | st.floats(min_value=1.0, exclude_min=True, allow_infinity=False).map(repr),
    "percent": st.sampled_from(["0", "-5", "150", "100.5", "nan", "x", "50,,x", "inf"]),
    "int_list": st.sampled_from(["", ",", "0", "-1", "1,,0", "x", "nan", "2.5", "1e400", "8,-8"]),
    "pos_list": st.sampled_from(["0", "-1", "nan", "x", "1,-1", "1e400,x"]),
    "out_file": st.sampled_from(
        [
            "/proc/infercast-nope/x.png",
            "/nonexistent-dir-xyz/out.json",
            "",
            " ",
            "/",
            "/proc/version",
        ]
    ),
    "out_dir": st.sampled_from(["/proc/version", "", "/proc/infercast-nope"]),
    "in_file": st.sampled_from(
        [
            "/nonexistent-dir-xyz/f.toml",
            "",
            "/",
            "/proc/infercast-nope",
            str(Path(__file__).parent / "data" / "not_utf8.bin"),
        ]
    ),
    "name": _not_a_name(),
    "pair_list": st.sampled_from(["", "/", "bf16", "bf16/", "/bf16", ",", "x/y/z"]),
    "ratio_list": st.sampled_from(["0:1", "1:0", "-1:2", "x:1", "1", ":", "1:2:3"]),
    "price_list": st.sampled_from(
        ["h100-sxm=nan", "h100-sxm=-1", "=2", "h100-sxm=", "x", "h100-sxm=inf"]
    ),
}

# ---- every value-taking flag of every command (machine excluded: minutes of work) ----
TWO_ROWS = str(Path(__file__).parent / "data" / "two_rows.csv")  # a validate run in 0.1 s
SIM = ["simulate", "--num-requests", "12", "--input-tokens", "64", "--output-tokens", "8"]
PLAN = [
    "plan",
    "-m",
    "llama-3.1-8b",
    "--rate",
    "1",
    "--slo-ttft-p99",
    "1",
    "--slo-tpot-p99",
    "0.1",
    "--input-tokens",
    "64",
    "--output-tokens",
    "8",
    "--executor",
    "serial",
]
BENCH = [
    "bench",
    "--model",
    "m",
    "--concurrency",
    "1",
    "--num-requests",
    "2",
    "--base-url",
    "http://127.0.0.1:9/v1",
    "--timeout",
    "2",
]
FLEET = [
    "fleet",
    "--policy",
    "fixed",
    "--replicas",
    "1",
    "--peak-rate",
    "0.5",
    "--hours",
    "0.02",
    "--input-tokens",
    "64",
    "--output-tokens",
    "8",
    "--executor",
    "serial",
]
COMMANDS: dict[str, tuple[list[str], dict[str, str]]] = {
    "estimate": (
        ["estimate"],
        {
            "--model": "name",
            "--hardware": "name",
            "--weights": "name",
            "--experts": "name",
            "--kv-cache": "name",
            "--compute": "name",
            "--batch": "int_list",
            "--context": "int_list",
            "--prompt": "count",
            "--tp": "count",
            "--pp": "count",
            "--ep": "count",
            "--price": "nonneg",
            "--profile": "in_file",
            "--engine": "name",
            "--memory-fraction": "fraction",
            "--plot": "out_file",
        },
    ),
    "hardware": (["hardware"], {"--show": "name"}),
    "simulate": (
        SIM,
        {
            "--config": "in_file",
            "--model": "name",
            "--hardware": "name",
            "--weights": "name",
            "--experts": "name",
            "--kv-cache": "name",
            "--tp": "count",
            "--ep": "count",
            "--scheduler": "name",
            "--max-num-seqs": "count",
            "--max-num-batched-tokens": "count",
            "--block-size": "count",
            "--num-blocks": "count",
            "--max-model-len": "count",
            "--replicas": "count",
            "--router": "name",
            "--workload": "name",
            "--rate": "pos_list",
            "--cv": "positive",
            "--concurrency": "pos_list",
            "--num-requests": "count",
            "--trace": "name",
            "--input-tokens": "positive",
            "--input-dist": "name",
            "--input-std": "nonneg",
            "--output-tokens": "positive",
            "--output-dist": "name",
            "--output-std": "nonneg",
            "--prefix-groups": "nonneg_int",
            "--prefix-tokens": "nonneg_int",
            "--seed": "seed",
            "--mode": "name",
            "--slo-ttft-s": "positive",
            "--slo-tpot-s": "positive",
            "--speculative": "name",
            "--num-speculative-tokens": "count",
            "--acceptance": "fraction",
            "--acceptance-std": "nonneg",
            "--draft-model": "name",
            "--profile": "in_file",
            "--engine": "name",
            "--records": "out_file",
            "--plot": "out_dir",
            "--prefill-replicas": "count",
            "--decode-replicas": "count",
            "--prefill-tp": "count",
            "--decode-tp": "count",
            "--prefill-hardware": "name",
            "--decode-hardware": "name",
            "--transfer-bandwidth": "positive",
            "--transfer-latency-s": "nonneg",
        },
    ),
    "plan": (
        PLAN,
        {
            "--model": "name",
            "--hardware": "name",
            "--rate": "positive",
            "--slo-ttft-p99": "positive",
            "--slo-tpot-p99": "positive",
            "--trace": "name",
            "--input-tokens": "count",
            "--output-tokens": "count",
            "--tp": "int_list",
            "--precision": "pair_list",
            "--batch-caps": "int_list",
            "--chunks": "int_list",
            "--acceptance": "fraction",
            "--disagg-ratios": "ratio_list",
            "--num-requests": "count",
            "--seed": "seed",
            "--max-gpus": "count",
            "--price": "price_list",
            "--executor": "name",
            "--workers": "count",
            "--top-k": "count",
            "--alternatives": "nonneg_int",
            "--plot": "out_file",
        },
    ),
    "bench": (
        BENCH,
        {
            "--base-url": "name",
            "--endpoint": "name",
            "--request-rate": "pos_list",
            "--concurrency": "pos_list",
            "--burstiness": "positive",
            "--ramp-to-rate": "positive",
            "--num-requests": "count",
            "--input-tokens": "count",
            "--output-tokens": "count",
            "--range-ratio": "fraction",
            "--shared-prefix-tokens": "nonneg_int",
            "--dataset": "name",
            "--max-input-tokens": "count",
            "--tokenizer": "in_file",
            "--max-duration": "positive",
            "--warmup": "nonneg_int",
            "--timeout": "positive",
            "--seed": "seed",
            "--slo-ttft-ms": "positive",
            "--slo-tpot-ms": "positive",
            "--slo-attainment": "fraction",
            "--search-goodput": "positive",
            "--percentiles": "percent",
            "--jsonl": "out_file",
            "--plot": "out_file",
            "--sim-hardware": "name",
            "--sim-config": "in_file",
        },
    ),
    "validate": (
        ["validate", "--data", TWO_ROWS],
        {
            "--data": "in_file",
            "--profile": "in_file",
            "--plot": "out_file",
            "--by": "name",
            "--assume-weights": "name",
        },
    ),
    "calibrate": (
        ["calibrate", "--data", TWO_ROWS, "--out", "/nonexistent-dir-xyz/p.toml"],
        {"--data": "in_file", "--out": "out_file", "--min-group-rows": "count", "--name": "name"},
    ),
    "serve": (
        ["serve"],
        {
            "--model": "name",
            "--max-num-seqs": "count",
            "--max-num-batched-tokens": "count",
            "--scheduler": "name",
            "--max-model-len": "count",
            "--kv-cache-gib": "positive",
            "--threads": "count",
            "--max-waiting": "count",
            "--seed": "seed",
            "--backend": "name",
            "--max-body-bytes": "count",
            "--max-prompt-chars": "count",
            "--header-timeout": "positive",
            "--body-timeout": "positive",
            "--port": "port",
        },
    ),
    "mock-server": (
        ["mock-server"],
        {
            "--ttft-ms": "nonneg",
            "--itl-ms": "nonneg",
            "--tokens-per-chunk": "count",
            "--default-max-tokens": "count",
            "--stop-after": "count",
            "--reasoning-tokens": "nonneg_int",
            "--http-error-every": "nonneg_int",
            "--midstream-close-every": "nonneg_int",
            "--midstream-close-after": "nonneg_int",
            "--hang-every": "nonneg_int",
            "--port": "port",
        },
    ),
    "fleet": (
        FLEET,
        {
            "--model": "name",
            "--hardware": "name",
            "--weights": "name",
            "--kv-cache": "name",
            "--tp": "count",
            "--max-num-seqs": "count",
            "--policy": "name",
            "--peak-rate": "positive",
            "--hours": "positive",
            "--trace": "name",
            "--lengths": "name",
            "--input-tokens": "count",
            "--output-tokens": "count",
            "--trough-fraction": "fraction",
            "--replicas": "count",
            "--max-replicas": "count",
            "--metric": "name",
            "--headroom": "positive",
            "--storage-bandwidth": "positive",
            "--warmup-s": "nonneg",
            "--tick-s": "positive",
            "--max-queue-s": "positive",
            "--slo-ttft-ms": "positive",
            "--slo-tpot-ms": "positive",
            "--price": "nonneg",
            "--seed": "seed",
            "--per-minute": "out_file",
            "--plot": "out_file",
            "--groups": "count",
            "--executor": "name",
            "--workers": "count",
            "--prefill-replicas": "count",
            "--decode-replicas": "count",
            "--prefill-tp": "count",
            "--decode-tp": "count",
            "--prefill-hardware": "name",
            "--decode-hardware": "name",
            "--prefill-price": "nonneg",
            "--decode-price": "nonneg",
        },
    ),
    "engines": (["engines"], {"--show": "name"}),
    # ui: only the port (a host that happens to be valid would start a server that never ends)
    "ui": (["ui", "--host", "127.0.0.1"], {"--port": "port"}),
}
# A value of these kinds may happen to be valid (a name that is a real preset is filtered
# out, but e.g. a dtype spelled oddly may parse): such a run must still be clean (exit 0).
MAY_BE_VALID = {"name"}
CASES = [(cmd, flag, kind) for cmd, (_, flags) in COMMANDS.items() for flag, kind in flags.items()]


@pytest.fixture(scope="module")
def busy_port():
    """A port held open, so a server command that wrongly accepts a value cannot start."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


@pytest.fixture(scope="module", autouse=True)
def one_app():
    """Build the Typer app once for the module (main builds it per call: 0.1 s each)."""
    real = cli.build_app
    cli.build_app = functools.lru_cache(maxsize=1)(real)
    yield
    cli.build_app = real


def run_cli(args: list[str]) -> tuple[int, str]:
    """Run the CLI in this process: (exit code, stderr). An escaping exception fails the test."""
    err, out = io.StringIO(), io.StringIO()
    with redirect_stderr(err), redirect_stdout(out):
        try:
            cli.main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, err.getvalue()


def assert_one_line_error(code: int, err: str, args: list[str]) -> None:
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2, f"{args}: exit {code}, stderr {err[-500:]!r}"
    assert "Traceback" not in err, f"{args}: {err[-2000:]}"
    assert len(lines) == 1 and lines[0].startswith("infercast: error: "), f"{args}: {err!r}"


@pytest.mark.parametrize("command, flag, kind", CASES, ids=[f"{c} {f}" for c, f, _ in CASES])
def test_generated_bad_values_are_one_line_errors(command, flag, kind, busy_port):
    base = list(COMMANDS[command][0])
    if command in ("serve", "mock-server", "ui") and flag != "--port":
        base += ["--port", str(busy_port)]

    @SETTINGS
    @given(value=KINDS[kind])
    def check(value: str) -> None:
        args = [*base, f"{flag}={value}"]
        code, err = run_cli(args)
        if kind in MAY_BE_VALID and code == 0:
            return
        assert_one_line_error(code, err, args)
        if command in ("serve", "mock-server") and flag != "--port":
            assert "in use" not in err, f"{args}: the value was accepted ({err.strip()})"

    check()


def test_the_fuzz_covers_every_command_but_machine_and_models():
    from infercast.cli import COMMAND_MODULES

    names = {m.rsplit(".", 1)[1].replace("_", "-") for m in COMMAND_MODULES}
    assert names - set(COMMANDS) <= {"machine", "models"}, names - set(COMMANDS)
    assert len(CASES) >= 150  # value-taking flags covered


def test_generated_values_really_are_bad():
    """The strategies themselves: nothing they draw for a number is a valid number of its kind."""

    @SETTINGS
    @given(
        st.sampled_from(["count", "positive", "fraction", "seed"]).flatmap(
            lambda k: st.tuples(st.just(k), KINDS[k])
        )
    )
    def check(pair: tuple[str, str]) -> None:
        kind, value = pair
        try:
            x = float(value)
        except ValueError:
            return
        ok = {
            "count": math.isfinite(x)
            and x >= 1
            and x == int(x)
            and "." not in value
            and "e" not in value.lower(),
            "positive": math.isfinite(x) and x > 0,
            "fraction": math.isfinite(x) and 0 <= x <= 1,
            "seed": math.isfinite(x) and 0 <= x < 2**64 and "." not in value,
        }[kind]
        assert not ok, (kind, value)

    check()


if __name__ == "__main__":  # pragma: no cover - print the case count per command
    for cmd in COMMANDS:
        n = sum(1 for c, _, _ in CASES if c == cmd)
        print(f"{cmd}: {n} flags x {FUZZ_EXAMPLES} = {n * FUZZ_EXAMPLES} cases", file=sys.stderr)
