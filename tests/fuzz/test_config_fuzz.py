"""Generated bad values for every field of every input file: one ConfigError, never a crash or a
default.

- simulate config files (TOML and JSON-typed values through ``build_config``),
- Hugging Face config.json fields (``model_from_hf_config``),
- hardware spec files (``hardware_from_mapping``), efficiency profiles,
- measurement CSV cells (``read_cases``: a bad cell is reported on its row, never raised).
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infercast.errors import ConfigError, ModelConfigError

EXAMPLES = 25
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    database=None,
)

NONFINITE = st.sampled_from([math.nan, math.inf, -math.inf])
WRONG_FOR_INT = (
    NONFINITE
    | st.booleans()
    | st.text(max_size=5)
    | st.just("8")
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer())
    | st.lists(st.integers(), max_size=2)
    | st.just({})
)
WRONG_FOR_FLOAT = NONFINITE | st.booleans() | st.text(max_size=5) | st.just("0.5") | st.just([])
WRONG_FOR_STR = st.just("") | st.just("   ") | st.integers() | st.booleans() | st.just([])


# ---- simulate config ------------------------------------------------------------------
SIM_INT = {
    ("tp",): 1,
    ("ep",): 1,
    ("replicas",): 1,
    ("seed",): 0,
    ("scheduler", "max_num_seqs"): 1,
    ("scheduler", "max_num_batched_tokens"): 1,
    ("scheduler", "block_size"): 1,
    ("scheduler", "num_blocks"): 1,
    ("scheduler", "max_model_len"): 2,
    ("workload", "num_requests"): 1,
    ("workload", "prefix_groups"): 0,
    ("workload", "prefix_tokens"): 0,
}
SIM_FLOAT = {
    ("slo_ttft_s",): 0.0,
    ("slo_tpot_s",): 0.0,
    ("workload", "cv"): 0.0,
    ("workload", "input", "mean"): 0.0,
    ("workload", "output", "std"): 0.0,
    ("disaggregation", "transfer_latency_s"): 0.0,
    ("disaggregation", "transfer_bandwidth_bytes_per_s"): 0.0,
    ("speculative", "acceptance"): 0.0,
}
SIM_STR = [
    ("model",),
    ("hardware",),
    ("weights",),
    ("router",),
    ("mode",),
    ("kv_cache",),
    ("scheduler", "policy"),
    ("workload", "arrival"),
    ("workload", "trace"),
]
SIM_BOOL = [("attn_dp",), ("scheduler", "prefix_caching"), ("disaggregation", "layer_overlap")]


def _nested(path: tuple[str, ...], value) -> dict:
    out: dict = {"workload": {"num_requests": 20, "input": {"mean": 64}, "output": {"mean": 8}}}
    node = out
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return out


def _sim_cases():
    ints = [(p, WRONG_FOR_INT | st.integers(max_value=lo - 1)) for p, lo in SIM_INT.items()]
    floats = [
        (
            p,
            WRONG_FOR_FLOAT
            | st.floats(max_value=lo, exclude_max=lo == 0.0).filter(lambda x, lo=lo: x < lo),
        )
        for p, lo in SIM_FLOAT.items()
    ]
    strs = [(p, WRONG_FOR_STR) for p in SIM_STR]
    bools = [(p, st.integers() | st.text(max_size=4) | st.just(1.0)) for p in SIM_BOOL]
    return ints + floats + strs + bools


SIM_CASES = _sim_cases()


@pytest.mark.parametrize("path, values", SIM_CASES, ids=[".".join(p) for p, _ in SIM_CASES])
def test_simulate_config_fields_refuse_wrong_values(path, values):
    from infercast.sim.config import build_config

    @SETTINGS
    @given(value=values)
    def check(value):
        with pytest.raises(ConfigError) as exc:
            build_config(_nested(path, value))
        assert "\n" not in str(exc.value)

    check()


def test_toml_true_is_not_one_and_inf_is_not_a_latency(tmp_path):
    from infercast.sim.config import build_config, read_config_file

    for text in (
        "tp = true",
        "replicas = 2.0",
        '[workload]\nnum_requests = "40"',
        "[disaggregation]\ntransfer_latency_s = inf",
        'model = ""',
        "seed = -1",
    ):
        f = tmp_path / "c.toml"
        f.write_text(text)
        with pytest.raises(ConfigError):
            build_config(read_config_file(f))
    (tmp_path / "bad.toml").write_bytes(b'model = "\xff"')
    with pytest.raises(ConfigError, match="UTF-8"):
        read_config_file(tmp_path / "bad.toml")


# ---- HF config.json ------------------------------------------------------------------
def _llama() -> dict:
    from infercast.specs.catalog import data_path

    return json.loads(data_path("models", "llama-3.1-8b.json").read_text())


HF_INT_FIELDS = [
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "num_hidden_layers",
    "intermediate_size",
    "vocab_size",
    "max_position_embeddings",
]


@pytest.mark.parametrize("field", HF_INT_FIELDS)
def test_hf_config_integer_fields_refuse_wrong_values(field):
    from infercast.specs.hf_reader import model_from_hf_config

    @SETTINGS
    @given(value=WRONG_FOR_INT | st.integers(max_value=-1) | st.just(10**30))
    def check(value):
        cfg = {**_llama(), field: value}
        try:
            spec = model_from_hf_config(cfg, "fuzz")
        except ModelConfigError as exc:
            assert "\n" not in str(exc) and field in str(exc) or "heads" in str(exc)
            return
        # accepted only if the value was a valid integer after all (e.g. 0 for an optional)
        assert spec.kv_bytes_per_token(2) > 0 if hasattr(spec, "kv_bytes_per_token") else True
        assert isinstance(value, int) and not isinstance(value, bool), (field, value)

    check()


def test_hf_config_findings_of_the_issue():
    from infercast.specs.hf_reader import model_from_hf_config

    for bad in (
        {"num_key_value_heads": "8"},
        {"num_key_value_heads": -8},
        {"head_dim": -128},
        {"num_key_value_heads": 7},
        {"num_hidden_layers": 1e30},
        {"num_hidden_layers": math.nan},
        {"hidden_size": math.inf},
        {"tie_word_embeddings": "false"},
    ):
        with pytest.raises(ModelConfigError):
            model_from_hf_config({**_llama(), **bad}, "fuzz")
    spec = model_from_hf_config({**_llama(), "num_key_value_heads": 8.0}, "ok")
    assert spec.attention.num_kv_heads == 8


def test_json_files_refuse_nan_and_non_utf8(tmp_path):
    from infercast.specs.catalog import load_hardware, load_model

    f = tmp_path / "config.json"
    f.write_text(json.dumps(_llama()).replace('"hidden_size": 4096', '"hidden_size": NaN'))
    with pytest.raises(ConfigError, match="NaN"):
        load_model(str(f))
    f.write_bytes(b'{"model_type": "\xff"}')
    with pytest.raises(ConfigError, match="UTF-8"):
        load_model(str(f))
    for text in ("[1, 2]", '"h100"', "3", "null"):
        h = tmp_path / "hw.json"
        h.write_text(text)
        with pytest.raises(ConfigError):
            load_hardware(str(h))


# ---- hardware files and profiles --------------------------------------------------------
GOOD_HW = {
    "name": "x",
    "memory_bytes": 8e10,
    "memory_bandwidth_bytes_per_s": 3e12,
    "flops_per_s": {"bf16": 1e15},
}
JSONISH = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
    lambda k: st.lists(k, max_size=3) | st.dictionaries(st.text(max_size=5), k, max_size=3),
    max_leaves=8,
)


@SETTINGS
@given(
    field=st.sampled_from(
        [
            "memory_bytes",
            "memory_bandwidth_bytes_per_s",
            "price_per_hour",
            "tdp_w",
            "link_bandwidth_bytes_per_s",
            "name",
            "flops_per_s",
        ]
    ),
    value=JSONISH,
)
def test_hardware_files_take_only_finite_numbers_of_the_right_type(field, value):
    from infercast.specs.hardware import hardware_from_mapping

    try:
        hw = hardware_from_mapping({**GOOD_HW, field: value}, "fuzz.json")
    except ConfigError as exc:
        assert "\n" not in str(exc)
        return
    numbers = [
        hw.memory_bytes,
        hw.memory_bandwidth_bytes_per_s,
        hw.tdp_w,
        hw.link_bandwidth_bytes_per_s,
        *hw.flops_per_s.values(),
    ]
    assert all(isinstance(x, float) and math.isfinite(x) and x >= 0 for x in numbers)
    assert hw.price_per_hour is None or math.isfinite(hw.price_per_hour)
    assert isinstance(hw.name, str) and hw.name.strip()


@SETTINGS
@given(
    field=st.sampled_from(["mem_bw_eff", "gemm_compute_eff", "step_overhead_s", "gemm_m_half"]),
    value=WRONG_FOR_FLOAT | st.floats(max_value=-1e-9),
)
def test_profile_fields_refuse_non_finite_and_wrong_types(field, value, tmp_path_factory):
    import tomllib

    from infercast.cost.profiles import load_profile_set

    f = tmp_path_factory.mktemp("p") / "p.toml"
    text = f"[profile]\n{field} = {json.dumps(value)}\n".replace("NaN", "nan").replace(
        "Infinity", "inf"
    )
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return  # not a TOML value at all: the TOML error path is tested elsewhere
    f.write_text(text)
    with pytest.raises(ConfigError):
        load_profile_set(str(f))


# ---- measurement CSVs: bad cells are reported per row --------------------------------------
@SETTINGS
@given(
    column=st.sampled_from(
        [
            "n_gpus",
            "tp",
            "batch",
            "output_tokens",
            "input_tokens",
            "concurrency",
            "value",
            "request_rate",
        ]
    ),
    cell=st.sampled_from(["0", "-1", "nan", "inf", "1e30", "x", "2.5", "true"]),
)
def test_measurement_cells_are_reported_on_their_row(column, cell):
    from infercast.validate.cases import read_cases

    if column in ("value", "request_rate") and cell in ("1e30", "2.5"):
        return  # real numbers in SI units: valid there
    header = (
        "id,scenario,metric,value,model,hardware,n_gpus,tp,batch,output_tokens,input_tokens,"
        "concurrency,request_rate"
    )
    row = {
        "id": "r1",
        "scenario": "offline",
        "metric": "output_throughput_total",
        "value": "100",
        "model": "llama-3.1-8b",
        "hardware": "h100-sxm",
        "n_gpus": "1",
        "tp": "1",
        "batch": "",
        "output_tokens": "128",
        "input_tokens": "128",
        "concurrency": "",
        "request_rate": "",
    }
    row[column] = cell
    text = header + "\n" + ",".join(row[c] for c in header.split(",")) + "\n"
    cases = read_cases(text, "fuzz.csv")
    assert len(cases) == 1 and cases[0].problem is not None and column in cases[0].problem
