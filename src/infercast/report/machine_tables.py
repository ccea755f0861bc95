"""Tables of ``infercast machine``: the measured bandwidth and FLOP/s figures of this machine,
and the engine's measured rates against the cost model fitted to them."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def print_machine(result: dict, console: Console) -> None:
    """The figures, the profile written, and (with --model) the engine rates and fitted profile."""
    table = Table(title=f"{result['name']}  (GB = 1e9 bytes)")
    for col in ("figure", "median", "best", "runs"):
        table.add_column(col, justify="right" if col != "figure" else "left")
    for key, m in result["measurements"].items():
        scale, unit = (1e9, "GB/s") if "bandwidth" in key else (1e9, "GFLOP/s")
        table.add_row(
            key,
            f"{m['median'] / scale:,.1f} {unit}",
            f"{m['best'] / scale:,.1f} {unit}",
            str(m["runs"]),
        )
    console.print(table)
    print(
        f"profile written to {result['profile_path']} "
        f"(memory {result['memory_bytes'] / 1e9:.1f} GB)"
    )
    engine = result.get("engine")
    if engine is None:
        return
    table = Table(
        title="engine rates (best of runs; fitted to the thread CPU time) vs the fitted cost model"
    )
    for col in (
        "unit",
        "GFLOP/s",
        "best cpu ms",
        "best ms",
        "median ms",
        "predicted ms",
        "cpu/predicted",
    ):
        table.add_column(col, justify="right" if col != "unit" else "left")
    for p in engine["points"]:
        table.add_row(
            p["label"],
            f"{p['flops'] / p['best_cpu_s'] / 1e9:,.1f}",
            f"{p['best_cpu_s'] * 1e3:,.2f}",
            f"{p['best_s'] * 1e3:,.2f}",
            f"{p['median_s'] * 1e3:,.2f}",
            f"{p['predicted_s'] * 1e3:,.2f}",
            f"{p['best_cpu_s'] / p['predicted_s']:.2f}",
        )
    console.print(table)
    prof = engine["profile"]
    small = (
        f"up to {prof['gemm_small_max_tokens']:.0f} rows gemm_small_peak_ratio "
        f"{prof['gemm_small_peak_ratio']:.3f}, gemm_small_m_half {prof['gemm_small_m_half']:.1f}; "
        "above them "
        if prof.get("gemm_small_max_tokens")
        else ""
    )
    head = f"LM head {engine['head_weights']}; " if engine.get("head_weights") else ""
    print(
        f"efficiency profile written to {engine['profile_path']}: {head}{small}gemm_compute_eff "
        f"{prof['gemm_compute_eff']:.3f}, gemm_m_half {prof['gemm_m_half']:.1f}, mem_bw_eff "
        f"{prof['mem_bw_eff']:.3f}, attn_bw_eff {prof['attn_bw_eff']:.3f}, step_overhead_s "
        f"{prof['step_overhead_s']:.2e}, layer_overhead_s {prof.get('layer_overhead_s', 0.0):.2e}, "
        f"token_overhead_s {prof.get('token_overhead_s', 0.0):.2e}, "
        f"widen_step_s {prof.get('widen_step_s', 0.0):.2e}; "
        f"model config for estimate: {engine['model_config_path']}"
    )
