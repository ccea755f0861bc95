"""`infercast machine`: measurements are sane and the profile loads as hardware."""

from __future__ import annotations

import json

import pytest

from infercast.engine.machine_probe import probe, profile_mapping, to_toml
from infercast.specs.catalog import load_hardware


@pytest.fixture(scope="module")
def result():
    # Small sizes: this checks plumbing and units, not the machine's real peak.
    return probe(
        threads=1,
        runs=2,
        bandwidth_bytes=16 * 2**20,
        matmul_n=256,
        integer_n=256,
        integer_tokens=64,
    )


def test_probe_reports_median_and_best(result):
    for m in result["measurements"].values():
        assert 0 < m["median"] <= m["best"] and m["runs"] == 2
    assert (
        result["memory_bandwidth_bytes_per_s"]
        >= (result["measurements"]["matvec_fp32_bandwidth_bytes_per_s"]["best"])
    )
    assert 1e8 < result["matmul_flops_per_s"]["fp32"] < 1e14  # a CPU core, in FLOP/s
    assert result["memory_bytes"] > 2**30


def test_int8_peak_is_the_faster_integer_kernel_where_prefill_runs_one(result):
    """The int8 line: the engine's integer q4 and int8 products (2 x weights x tokens ops/s),
    the faster of the two, where ``qlinear.integer_prefill`` runs them; else none."""
    from infercast.engine.qlinear import integer_prefill

    kernels = [f for f in ("q4", "int8") if integer_prefill(f)]
    found = {k.split("_")[1] for k in result["measurements"] if k.endswith("_integer_ops_per_s")}
    assert found == set(kernels)
    if not kernels:
        assert "int8" not in result["matmul_flops_per_s"]
        return
    best = max(result["measurements"][f"matmul_{f}_integer_ops_per_s"]["best"] for f in kernels)
    assert result["matmul_flops_per_s"]["int8"] == best > 1e8


@pytest.mark.parametrize("suffix", ["toml", "json"])
def test_profile_is_accepted_by_load_hardware(result, tmp_path, suffix):
    profile = profile_mapping(result)
    path = tmp_path / f"local.{suffix}"
    path.write_text(to_toml(profile, "test") if suffix == "toml" else json.dumps(profile))
    hw = load_hardware(str(path))
    assert hw.memory_bandwidth_bytes_per_s == pytest.approx(
        result["memory_bandwidth_bytes_per_s"], rel=1e-5
    )
    assert hw.peak_flops("fp32") == pytest.approx(result["matmul_flops_per_s"]["fp32"], rel=1e-5)


@pytest.mark.parametrize(("threads", "seconds"), [(1, 1.0), (2, 3.0)])
def test_one_thread_rates_are_timed_in_cpu_time_like_the_engines(monkeypatch, threads, seconds):
    """One thread: the process's CPU time (rate_probe's clock, so waiting for a core on a
    loaded machine does not halve the peaks the engine's CPU-time rates are fitted to);
    more threads: the wall clock. Fake clocks: CPU 1 s and wall 3 s a call."""
    import itertools

    from infercast.engine import machine_probe

    cpu, wall = itertools.count(0.0, 1.0), itertools.count(0.0, 3.0)
    monkeypatch.setattr(machine_probe.time, "process_time", lambda: next(cpu))
    monkeypatch.setattr(machine_probe.time, "perf_counter", lambda: next(wall))
    m = machine_probe._rate(6.0, lambda: None, runs=2, threads=threads)
    assert m.best == m.median == 6.0 / seconds


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_read_bandwidth_dots_one_slice_per_thread(monkeypatch, threads):
    """OpenBLAS's sdot runs on one thread at any limit, so more threads each dot their own
    slice (with one BLAS thread apiece): every element read once a pass, by ``threads`` calls
    that run at the same time."""
    import threading

    from infercast.engine import machine_probe

    calls, lock = [], threading.Lock()
    real_dot = machine_probe.np.dot

    def dot(a, b):
        with lock:
            calls.append((a.size, threading.get_ident()))  # from the pool's threads
        return real_dot(a, b)

    monkeypatch.setattr(machine_probe.np, "dot", dot)
    m = machine_probe.read_bandwidth(3 * 2**20, runs=2, threads=threads)
    n = 3 * 2**20 // 8
    assert m.runs == 2 and m.best > 0
    assert len(calls) == 3 * threads  # warm-up and two runs
    assert sum(size for size, _ in calls) == 3 * n
    assert {size for size, _ in calls} <= {n // threads, n // threads + 1}  # equal slices


@pytest.mark.parametrize(("threads", "cpu_s"), [(1, 2.0), (2, 5.0)])
def test_engine_rates_count_the_whole_process_cpu_with_one_thread(monkeypatch, threads, cpu_s):
    """One thread: the process's CPU time, so the work numba's parallel kernels (the q4
    widening) do on its worker thread counts; more threads: the calling thread's. Fake
    clocks: process 2 s, thread 5 s, wall 7 s a call."""
    import itertools

    from infercast.engine import rate_probe

    clocks = {"process_time": 2.0, "thread_time": 5.0, "perf_counter": 7.0}
    for name, step in clocks.items():
        monkeypatch.setattr(rate_probe.time, name, itertools.count(0.0, step).__next__)
    median, best, cpu = rate_probe._times(lambda: None, runs=2, threads=threads)
    assert (median, best, cpu) == (7.0, 7.0, cpu_s)


def test_machine_command_rejects_a_bad_output_name(tmp_path, capsys):
    from infercast.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["machine", "--output", str(tmp_path / "profile.txt")])
    assert exc.value.code == 2
    assert ".toml or .json" in capsys.readouterr().err


def _hardware(bw=17e9, peak=1.6e11, int8_peak=None):
    from infercast.specs.hardware import hardware_from_mapping

    flops = {"fp32": peak} if int8_peak is None else {"fp32": peak, "int8": int8_peak}
    return hardware_from_mapping(
        {
            "name": "test-cpu",
            "memory_bytes": 2**34,
            "memory_bandwidth_bytes_per_s": bw,
            "link_bandwidth_bytes_per_s": 0.0,
            "price_per_hour": 0.0,
            "flops_per_s": flops,
        },
        "test",
    )


@pytest.mark.parametrize(
    ("weights", "large"), [("fp32", "gemm_compute_eff"), ("q4", "gemm_compute_eff_8bit")]
)
def test_fit_recovers_the_profile_that_made_the_times(weights, large, monkeypatch):
    """Times made by the cost model with known factors: the fit must give those factors back;
    at an int8 compute dtype (q4 prefill on the integer kernels) the large GEMMs' factor is
    ``gemm_compute_eff_8bit``."""
    import infercast.engine.qlinear as ql
    from infercast.cost.efficiency import EfficiencyProfile
    from infercast.engine.config import named_config
    from infercast.engine.predict import step_model
    from infercast.engine.profile_fit import fit_profile, predict_s
    from infercast.engine.rate_probe import Point, layer_ops

    monkeypatch.setattr(ql, "integer_prefill", lambda fmt: fmt == "q4")
    cfg = named_config("100m")
    sm = step_model(cfg, _hardware(int8_peak=3.2e11), weights=weights)
    assert sm.machine.compute_dtype == ("fp32" if weights == "fp32" else "int8")
    truth = EfficiencyProfile(  # two curves, as the engine's two kernels (fit_profile)
        gemm_small_max_tokens=48.0,
        gemm_small_peak_ratio=0.25,
        gemm_small_m_half=3.0,
        **{large: 0.55},
        gemm_m_half=24.0,
        mem_bw_eff=0.9,
        attn_bw_eff=0.35,
        attn_compute_eff=0.3,
        elementwise_bw_eff=0.12,
        step_overhead_s=2e-4,
        layer_overhead_s=5e-5,
    )
    points = [
        Point("gemm", f"M={m}", tuple(o.scaled(12) for o in layer_ops(cfg, m)), 0, 0, 0, 1)
        for m in (1, 4, 8, 16, 32, 64, 128, 512)
    ]
    for new, cached in (([1] * 8, [128] * 8), ([1] * 32, [512] * 32), ([512], [0])):
        ops = tuple(
            o.op for o in sm.step_cost(new, cached).ops if o.op.name.startswith("attention")
        )
        points.append(Point("attention", str(len(new)), ops, 0, 0, 0, 1))
    for n in (128, 512):
        ops = tuple(o.op for o in sm.step_cost([n], [0]).ops if o.op.kind == "elementwise")
        points.append(Point("elementwise", str(n), ops, 0, 0, 0, 1))
    points += [Point("overhead", "step", (), 0, 0, 0, 1, n) for n in (1, 12)]
    points = [
        Point(p.kind, p.label, p.ops, 0, 0, predict_s(p, sm.machine, truth), 1, p.layers)
        for p in points
    ]
    fit = fit_profile(points, sm.machine)
    for name in (
        "gemm_small_max_tokens",
        "gemm_small_peak_ratio",
        "gemm_small_m_half",
        large,
        "gemm_m_half",
        "mem_bw_eff",
        "attn_bw_eff",
        "attn_compute_eff",
        "elementwise_bw_eff",
        "step_overhead_s",
        "layer_overhead_s",
    ):
        assert getattr(fit.profile, name) == pytest.approx(getattr(truth, name), rel=1e-3), name
    assert max(fit.ratios()) == pytest.approx(1.0, abs=1e-4)


def test_engine_rates_give_a_profile_that_load_profile_reads(tmp_path):
    """Measured on the tiny model (plumbing, not this machine's real rates)."""
    from infercast.cost.efficiency import load_profile
    from infercast.cost.profiles import profile_compute
    from infercast.engine.config import named_config
    from infercast.engine.predict import step_model
    from infercast.engine.profile_fit import fit_profile, profile_toml
    from infercast.engine.rate_probe import measure

    cfg = named_config("tiny")
    sm = step_model(cfg, _hardware())
    points = measure(cfg, sm, rows=(1, 8, 128), runs=1, stream_bytes=2**20)
    kinds = [p.kind for p in points]
    assert (
        kinds.count("gemm") == 3 and kinds.count("attention") == 5 and kinds.count("overhead") == 2
    )
    assert kinds.count("elementwise") == 2  # a prefill's norms, RoPE, SiLU and adds: 128, 512
    assert kinds.count("overhead_multi") == 1  # a two-request step: layer by layer
    assert "LM head" in points[1].label and "LM head" not in points[2].label  # M=8 has it, 128 not
    assert all(0 < p.best_s <= p.median_s and 0 < p.best_cpu_s for p in points)
    fit = fit_profile(points, sm.machine, name="tiny fit")
    path = tmp_path / "p.toml"
    path.write_text(profile_toml(fit, "test", sm.machine.compute_dtype))
    loaded = load_profile(path)
    assert loaded.name == "tiny fit"
    assert profile_compute(str(path)) == "fp32"  # the peak the fit priced the products at
    assert loaded.gemm_m_half == pytest.approx(fit.profile.gemm_m_half, rel=1e-5)
    assert loaded.step_overhead_s == pytest.approx(fit.profile.step_overhead_s, rel=1e-5)
    assert step_model(cfg, _hardware(), profile=loaded).step_time_s([1], [8]) > 0


@pytest.mark.parametrize(
    "args",
    [
        ["--rows", "1,x"],
        ["--rows", "0,4"],
        ["--model", "nope"],
        ["--output", "/nonexistent-dir/x.toml"],
    ],
)
def test_machine_command_rejects_bad_rows_models_and_folders(args, capsys):
    from infercast.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["machine", *args])
    assert exc.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("weights", ["q4", "int8"])
def test_engine_rates_per_weight_format_time_that_formats_kernels(weights):
    """``measure(weights=...)``: the products run in the format (its kernels), and the ops
    charge its bytes per weight, as the step model of ``serve --weights`` does."""
    pytest.importorskip("torch", reason="compact formats need the torch extra")
    from infercast.cost.ops import gemm
    from infercast.engine.config import named_config
    from infercast.engine.predict import step_model
    from infercast.engine.profile_fit import fit_profile
    from infercast.engine.rate_probe import measure, weight_bytes

    cfg = named_config("tiny")
    sm = step_model(cfg, _hardware(), weights=weights)
    wb = weight_bytes(weights)
    assert wb == sm.precision.weight_bytes and wb < 4.0 / 3
    points = measure(cfg, sm, rows=(1, 64), runs=1, stream_bytes=2**20, weights=weights)
    m1 = points[0]
    head = [o for o in m1.ops if o.name == "lm_head"]
    assert head == [gemm("lm_head", 1, cfg.hidden_size, cfg.vocab_size, wb, 4)]
    assert all(p.best_cpu_s > 0 for p in points)
    fit = fit_profile(points, sm.machine, name=f"tiny {weights}")
    assert fit.profile.mem_bw_eff > 0 and fit.profile.step_overhead_s >= 0


def test_rate_probe_products_in_a_format_equal_its_matrices():
    """The ring's compact matrices are the format's (not fp32 ones timed under its name)."""
    pytest.importorskip("torch", reason="compact formats need the torch extra")
    from infercast.engine.config import named_config
    from infercast.engine.qlinear import Int4Matrix
    from infercast.engine.rate_probe import _in_format
    from infercast.engine.weights import random_weights

    w = _in_format(random_weights(named_config("tiny"), seed=0), "q4")
    assert all(isinstance(lw.w_down, Int4Matrix) for lw in w.layers)
    assert isinstance(w.lm_head, Int4Matrix)


def test_machine_command_rejects_an_unknown_weight_format(capsys):
    from infercast.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["machine", "--weights", "q3"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--weights 'q3'" in err and "Traceback" not in err


def test_machine_command_names_the_torch_extra_for_a_compact_format(monkeypatch, capsys):
    """--weights q4 without torch: the install hint, before any measuring; exit 2."""
    import builtins

    from infercast.cli import main

    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    with pytest.raises(SystemExit) as exc:
        main(["machine", "--weights", "q4", "--model", "tiny"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "infercast[torch]" in err and "Traceback" not in err


def test_fit_with_widening_recovers_the_curve_and_charges_every_layer_a_step():
    """GEMM times with 3 ms a layer of widening above 48 rows: fitted with the measured widening,
    the curve comes back and the profile charges 12 layers' worth (36 ms) a step."""
    from infercast.cost.efficiency import EfficiencyProfile
    from infercast.engine.config import named_config
    from infercast.engine.predict import step_model
    from infercast.engine.profile_fit import fit_profile, predict_s
    from infercast.engine.rate_probe import Point, layer_ops

    cfg = named_config("100m")
    sm = step_model(cfg, _hardware())
    truth = EfficiencyProfile(gemm_compute_eff=0.55, gemm_m_half=24.0, mem_bw_eff=0.9)
    points = [
        Point("gemm", f"M={m}", tuple(o.scaled(n) for o in layer_ops(cfg, m)), 0, 0, 0, 1, n)
        for m, n in ((1, 12), (4, 12), (8, 12), (16, 12), (32, 12), (64, 12), (128, 6), (512, 2))
    ]
    points = [
        Point(p.kind, p.label, p.ops, 0, 0, predict_s(p, sm.machine, truth, 3e-3), 1, p.layers)
        for p in points
    ]
    assert points[5].best_cpu_s > predict_s(points[5], sm.machine, truth) + 0.035  # 12 x 3 ms
    fit = fit_profile(points, sm.machine, widen_layer_s=3e-3, num_layers=cfg.num_layers)
    for name in ("gemm_compute_eff", "gemm_m_half"):  # the large products' curve
        assert getattr(fit.profile, name) == pytest.approx(getattr(truth, name), rel=1e-3), name
    # every point compute-bound at the truth: the small curve reproduces their times (its
    # bandwidth factor is then free above the lowest one that keeps them compute-bound)
    assert fit.ratios() == pytest.approx([1.0] * len(points), abs=1e-6)
    assert fit.profile.widen_step_s == pytest.approx(3e-3 * cfg.num_layers)
    assert fit.profile.widen_min_tokens == 48


def test_fit_charges_a_multi_token_step_what_it_adds_to_the_one_token_line():
    """Overhead points 0.1 ms + 2 us a layer at one token, 1.3 ms at two requests and 30 layers:
    the line stays the one-token points', the two-request step adds 1.14 ms."""
    from infercast.engine.config import named_config
    from infercast.engine.predict import step_model
    from infercast.engine.profile_fit import fit_profile
    from infercast.engine.rate_probe import Point

    sm = step_model(named_config("tiny"), _hardware())
    points = [
        Point("overhead", "1", (), 0, 0, 0.102e-3, 1, 1),
        Point("overhead", "30", (), 0, 0, 0.160e-3, 1, 30),
        Point("overhead_multi", "30, batch 2", (), 0, 0, 1.3e-3, 1, 30),
    ]
    fit = fit_profile(points, sm.machine)
    assert fit.profile.step_overhead_s == pytest.approx(0.1e-3)
    assert fit.profile.layer_overhead_s == pytest.approx(2e-6)
    assert fit.profile.multi_token_step_s == pytest.approx(1.14e-3)
    assert fit.predicted_s == pytest.approx([p.best_cpu_s for p in points])


@pytest.mark.parametrize("weights", ["fp32", "bf16"])
def test_multi_token_overhead_point_runs_a_batched_decode_step(weights, monkeypatch):
    """At batch 2 the overhead point's forward is a batched decode step: layer by layer for
    fp32 layers, the batched fused step for compact ones (engine/decode_step.py
    ``run_many``), as a served decode step of two requests."""
    if weights != "fp32":
        pytest.importorskip("torch", reason="compact formats need the torch extra")
        pytest.importorskip("numba", reason="the fused step needs numba")
    from infercast.engine.config import named_config
    from infercast.engine.decode_step import FusedDecode
    from infercast.engine.model import LlamaModel
    from infercast.engine.rate_probe import overhead_point

    calls, fused = [], []
    real, many = LlamaModel._attention, FusedDecode.run_many

    def counted(self, *a, **kw):
        calls.append(1)
        return real(self, *a, **kw)

    monkeypatch.setattr(LlamaModel, "_attention", counted)
    monkeypatch.setattr(FusedDecode, "run_many", lambda *a: fused.append(1) or many(*a))
    cfg = named_config("tiny")
    p = overhead_point(cfg, runs=2, weights=weights, batch=2)
    assert p.kind == "overhead_multi" and p.layers == cfg.num_layers and p.best_cpu_s > 0
    steps = 3  # warm-up and two runs
    if weights == "fp32":
        assert len(calls) == steps * cfg.num_layers and not fused
    else:
        assert not calls and len(fused) == steps


def test_decode_attention_points_time_the_fused_steps_attention_for_compact_layers(monkeypatch):
    """Decode attention points of q4 layers time the fused step's attention (which those steps
    run), prefill ones model.attend; fp32 layers time model.attend throughout; bf16 beyond the
    batched step's tokens (4 where PyTorch's native bf16 matmul takes over) model.attend."""
    pytest.importorskip("numba", reason="the fused step needs numba")
    import infercast.engine.decode_step as ds
    import infercast.engine.qlinear as ql
    from infercast.engine import rate_probe
    from infercast.engine.config import named_config
    from infercast.engine.predict import step_model

    cfg = named_config("tiny")
    sm = step_model(cfg, _hardware())
    fused, real = [], ds.decode_attention
    monkeypatch.setattr(ds, "decode_attention", lambda *a: fused.append(len(a[2])) or real(*a))
    kw = dict(runs=1, batches=(1, 8), prefills=(16,), evict_bytes=1024)
    assert len(rate_probe.attention_points(cfg, sm, weights="q4", **kw)) == 3
    assert fused and set(fused) == {1, 8}
    fused.clear()
    rate_probe.attention_points(cfg, sm, weights="fp32", **kw)
    assert not fused
    monkeypatch.setattr(ql, "bf16_jit_max_tokens", lambda: 4)
    assert rate_probe._fused_attention("bf16", 4) and not rate_probe._fused_attention("bf16", 8)


def test_widening_is_the_compact_products_time_less_the_float32_products(monkeypatch):
    """Where a format's prefill widens (q4 with the integer kernels' prefill off); 0 for fp32
    and where the integer kernels run its prefill (nothing widened)."""
    import infercast.engine.qlinear as ql
    from infercast.engine import rate_probe
    from infercast.engine.config import named_config
    from infercast.engine.qlinear import KERNEL_MAX_TOKENS

    cfg = named_config("tiny")
    assert rate_probe.widen_layer_s(cfg, "fp32") == 0.0
    pytest.importorskip("torch")
    monkeypatch.setattr(ql, "integer_prefill", lambda fmt: True)
    assert rate_probe.widen_layer_s(cfg, "q4") == 0.0
    monkeypatch.undo()
    monkeypatch.setattr(ql, "INT_PREFILL", False)
    calls, cpu = [], iter([3e-3, 1e-3])

    def fake_times(fn, runs, before=None, threads=1):
        calls.append(fn())
        return 0.0, 0.0, next(cpu)

    monkeypatch.setattr(rate_probe, "_times", fake_times)
    assert rate_probe.widen_layer_s(cfg, "q4", runs=1) == pytest.approx(2e-3)
    assert all(y.shape[1] == KERNEL_MAX_TOKENS + 1 for ys in calls for y in ys)


def test_engine_rates_of_a_mixed_file_time_and_record_its_heads_own_format(tmp_path):
    """``machine --weights auto`` on SmolLM2 fits ``q4+int8``: the ring's layers are 4-bit and
    its head int8, the head's op charges int8's bytes, and the profile records the head's
    format, which a simulation then prices the head at."""
    pytest.importorskip("torch", reason="compact formats need the torch extra")
    from infercast.cost.efficiency import load_profile
    from infercast.cost.ops import gemm
    from infercast.cost.profiles import profile_head_weights
    from infercast.engine.config import named_config
    from infercast.engine.predict import step_model
    from infercast.engine.profile_fit import fit_profile, profile_toml
    from infercast.engine.qlinear import Int4Matrix, Int8Matrix
    from infercast.engine.rate_probe import _in_format, head_weight_bytes, measure, weight_bytes
    from infercast.engine.weights import random_weights

    cfg = named_config("tiny")
    w = _in_format(random_weights(cfg, seed=0), "q4+int8")
    assert all(isinstance(lw.w_down, Int4Matrix) for lw in w.layers)
    assert isinstance(w.lm_head, Int8Matrix)
    sm = step_model(cfg, _hardware(), weights="q4+int8")
    assert weight_bytes("q4+int8") == weight_bytes("q4") < head_weight_bytes("q4+int8") == 1.0
    points = measure(cfg, sm, rows=(1, 64), runs=1, stream_bytes=2**20, weights="q4+int8")
    head = [o for o in points[0].ops if o.name == "lm_head"]
    assert head == [gemm("lm_head", 1, cfg.hidden_size, cfg.vocab_size, 1.0, 4)]
    fit = fit_profile(points, sm.machine, name="tiny q4+int8")
    path = tmp_path / "p.toml"
    path.write_text(profile_toml(fit, "test", "fp32", sm.precision.head_weights))
    assert profile_head_weights(str(path)) == "int8"
    assert load_profile(path).name == "tiny q4+int8"
    plain = tmp_path / "q.toml"
    plain.write_text(profile_toml(fit, "test", "fp32"))
    assert profile_head_weights(str(plain)) is None


def test_elementwise_points_time_a_prefills_elementwise_work_against_its_ops(monkeypatch):
    """Each prefill size: the forward's elementwise calls over every layer (RMSNorm twice, RoPE
    once, SiLU x up once a layer), from the same values each run (silu_mul works in place),
    charged as the step model's elementwise ops of that prefill."""
    import numpy as np

    import infercast.engine.model as model
    from infercast.engine import rate_probe
    from infercast.engine.config import named_config
    from infercast.engine.predict import step_model

    cfg = named_config("tiny")
    sm = step_model(cfg, _hardware())
    calls = {"norm": 0, "silu": 0}
    norm, silu = model.rms_norm, model.silu_mul
    first_gates = []

    def counted_norm(*a):
        calls["norm"] += 1
        return norm(*a)

    def counted_silu(gate, up):
        calls["silu"] += 1
        if calls["silu"] % cfg.num_layers == 1:  # the first layer of a run: reset values
            first_gates.append(gate.copy())
        return silu(gate, up)

    monkeypatch.setattr(model, "rms_norm", counted_norm)
    monkeypatch.setattr(model, "silu_mul", counted_silu)
    points = rate_probe.elementwise_points(cfg, sm, runs=2, prefills=(16, 64))
    assert [p.kind for p in points] == ["elementwise"] * 2
    runs = 3  # a warm-up and two timed
    assert calls == {"norm": 2 * runs * 2 * cfg.num_layers, "silu": 2 * runs * cfg.num_layers}
    assert np.array_equal(first_gates[1], first_gates[2])  # reset before each timed run
    for p, n in zip(points, (16, 64), strict=True):
        expected = [o.op for o in sm.step_cost([n], [0]).ops if o.op.kind == "elementwise"]
        assert list(p.ops) == expected and expected
        assert 0 < p.best_cpu_s and 0 < p.best_s <= p.median_s


def test_machine_command_measures_the_rate_probes_row_counts():
    import inspect

    import typer

    from infercast.commands import machine
    from infercast.engine.rate_probe import DEFAULT_ROWS

    app = typer.Typer()
    machine.register(app)
    (cmd,) = app.registered_commands
    default = inspect.signature(cmd.callback).parameters["rows"].default.default
    assert default == ",".join(map(str, DEFAULT_ROWS))
