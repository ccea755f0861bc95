"""Annotate InferenceX runs in aiconfigurator's silicon sample (data/README.md cites each rule).

    python benchmarks/annotate_inferencex.py           # list what it would annotate
    python benchmarks/annotate_inferencex.py --write   # annotate it in measurements.csv

Twins.
aiconfigurator's silicon sample holds some runs twice: once under the InferenceX record name
(``2026_03_25_...`` / ``2026_04_06_...``, which data/README.md annotates with InferenceX's
``length_range_ratio`` 0.8) and once under an older name (``dsr1_b200_sglang_fp4_agg_...``),
imported as a fixed-length run. A run is a twin when its TTFT and TPOT rows both carry exactly
the same values (every printed digit) as an annotated run of the same scenario, lengths and
concurrency: two runs do not measure two 16-digit means alike. The twin then gets the
annotated run's ``length_range_ratio`` (and its ``scheduler_recv_interval`` when every
annotated copy states the same one), plus ``inferencex_twin``: the annotated run's id. Only the
``extra`` cell of a twin's rows changes; the file is otherwise left byte for byte as it is.

Attention-DP balance. InferenceX starts TensorRT-LLM with attention data parallel and
``attention_dp_config: enable_balance: true`` (``SemiAnalysisAI/InferenceX``
``benchmarks/dsr1_fp4_b200_trt.sh``, ``dsr1_fp8_b200_trt.sh``, ``dsr1_fp8_h200_trt.sh``:
``timeout_iters: 60``, ``batching_wait_iters: 0``; ``gptoss_fp4_b200_trt.sh``: neither, so
TensorRT-LLM's ``AttentionDpConfig`` defaults 50 and 10, ``tensorrt_llm/llmapi/llm_args.py``).
Each InferenceX TensorRT-LLM run with attention DP (``ep > tp * pp``, the layout rule of
``validate/setup.py``) of those models gets ``attention_dp_balance``: [timeout_iters,
batching_wait_iters].

GPUs counted twice. The import gives the aggregated runs of InferenceX's ``2026_04_06`` file
whose record name states ``_tpX_epX_`` (X > 1: expert parallel over the TP group's own GPUs)
``n_gpus`` X * X, and TP or DP X * X with it (``_tp8_ep8_``: 64 GPUs, ``tp`` 64 or ``tp`` 1,
``dp`` 64), where the same recipes named in the ``2026_03_25`` form (``_tp8_0_ep8_0_``) state X
GPUs, and ``_tpX_ep1_`` names state X; InferenceX runs them on one node of X GPUs (its
single-node B200/H200 scripts, ``benchmarks/dsr1_fp4_b200.sh``...). Three such runs and an older
copy each of configs 191 and 192 equal, to every digit, runs that state X GPUs (AIC-4620 /
AIC-2739, AIC-0595 / AIC-2805, AIC-0701 / AIC-2792). Such a run gets ``n_gpus_ran``: X. So does
every run of an older config (``..._cfgN``, same part and engine) of which one run is a twin of a
run with ``n_gpus_ran`` or stating that count itself. ``validate/setup.py`` runs X GPUs (``tp``
X where the row states ``tp`` = ``n_gpus``); ``n_gpus``, ``tp`` and ``dp`` stay as imported.

Batch waiting. From ``SemiAnalysisAI/InferenceX`` commit ec7bafaae (2026-01-29, PR #594, "dsr1
fp8 b200 agg update") ``benchmarks/dsr1_fp8_b200_trt.sh`` (now
``benchmarks/single_node/fixed_seq_len/``, the rule unchanged) adds ``batch_wait_timeout_iters:
40`` and ``batch_wait_max_tokens_ratio: 0.8`` to TensorRT-LLM's extra config for 1024/1024 at 64
or more clients; the same commit moved ``dsr1-fp8-b200-trt`` in ``.github/configs/
nvidia-master.yaml`` from image ``tensorrt-llm/release:1.1.0rc2.post2`` to ``1.2.0rc6.post2``
and ran 1024/1024 at 64-128 clients as TP 8, EP 1 (before: EP 8). So a DeepSeek-R1 FP8 B200
TensorRT-LLM run of the sample at 1024/1024, 64 or more clients, without attention DP, whose
image is 1.2.0rc6 or later (``trtllm-1.2.0rc6*``, the recipe version that image pins; the
record name says R1, ``dsr1_`` rows being imported as ``deepseek-v3``) gets
``batch_wait``: [timeout_iters, max_tokens_ratio] (``sched/admission.py`` ``BatchWait``;
TensorRT-LLM skips it under attention DP), unless it is an MTP run (below), whose script sets none.

KV cache dtype. InferenceX's single-node DeepSeek-R1 SGLang recipes on B200 (the runs that
carry ``scheduler_recv_interval``, data/README.md) start the server with ``--kv-cache-dtype
fp8_e4m3``: ``benchmarks/dsr1_fp4_b200_docker.sh`` and ``_slurm.sh``, ``dsr1_fp8_b200_docker.sh``
and ``_slurm.sh`` from commit c4e4a3b66 (2025-10-01; the fp8 docker script lacked it before),
``dsr1_fp4_b200.sh`` / ``dsr1_fp8_b200.sh`` after b0c4ed21b (2026-01-22), and
``benchmarks/single_node/fixed_seq_len/`` today; every such run of the sample was measured from
2025-11-02 on. They get ``kv_cache_dtype``: "fp8" (the row's ``kv_cache`` cell is empty; the
``validate/setup.py`` rule would take SGLang's 16-bit default).

Recv interval of the ``_tpX_epX_`` runs. The first ``scheduler_recv_interval`` annotation
(data/README.md) took the runs stating TP 4 or 8; the ``2026_04_06`` runs named ``_tpX_epX_``
(GPUs counted twice, above) ran the same scripts with ``EP_SIZE`` as ``--ep-size``
(``.github/configs/nvidia-master.yaml``: ``dsr1-fp4-b200-sglang`` ``{tp: 4, ep: 4}`` and ``{tp: 8,
ep: 8}`` from d8fe8f73e, 2025-11-10; ``dsr1-fp8-b200-sglang`` ``{tp: 8, ep: 8}`` from d8fe8f73e to
189ae51cc, 2025-11-18). Each InferenceX DeepSeek-R1 B200 SGLang run (or twin) without one gets it
by the same rule (30 at 16 or more clients, else 10; 10 for FP8 at TP 4), so the KV dtype too.

SGLang launch flags (``--sglang-flags``; not in the shipped file, docs/history/validation.md).
Unchanged from c4e4a3b66 (2025-10-01) through 1b234994f (2026-06-02): ``dsr1_fp4_b200*.sh``
passes ``--cuda-graph-max-bs 256 --max-running-requests 256 --mem-fraction-static 0.85
--chunked-prefill-size 16384 --disable-radix-cache --stream-interval 10``; ``dsr1_fp8_b200*.sh``
at TP 8 ``--cuda-graph-max-bs 128 --max-running-requests 128 --mem-fraction-static 0.82
--chunked-prefill-size 32768 --max-prefill-tokens 32768 --disable-radix-cache --stream-interval
30``, and at TP 4 (added by 1d29967c4, 2026-01-13, 8192/1024 only) 32, 32, 0.95, 8192, 8192.
InferenceX's client sends ``--ignore-eos`` (``benchmarks/benchmark_lib.sh``
``run_benchmark_serving``), so those runs admit by SGLang's ``add_one_req_ignore_eos``
(``sglang_disable_radix_cache``). The scripts set ``--max-running-requests`` to the most
clients the config runs; the sample's FP8 TP 8 runs at 256 and 512 clients (AIC-1970, 4871, 4825;
no config of ``nvidia-master.yaml`` runs them) measured TTFTs (1.8-8.7 s) far below a queue behind
128 seats, so they get the other flags only. Not carried: ``--cuda-graph-max-bs`` (at or above the
runs' concurrency), ``--stream-interval`` (SGLang streams the first token at once,
``len(output_ids) % stream_interval == 1``: TTFT unchanged) and FP4's default
``--max-prefill-tokens`` 16384 (equal to the chunk, it stops nothing under that admission).

MTP runs. InferenceX's DeepSeek-R1 TensorRT-LLM recipes come in pairs: ``dsr1-fp{4,8}-b200-trt``
and ``dsr1-fp8-h200-trt`` without speculation, and ``...-trt-mtp`` with it (``.github/configs/
nvidia-master.yaml``, ``spec-decoding: mtp``), and the sample's record names do not say which ran.
Its ``silicon_data_source`` does: ``measured=`` is the time of the InferenceX commit whose
``perf-changelog.yaml`` entry triggered the sweep (2026-02-03T17:34:19Z is commit 6eecc0e66,
2026-02-06T17:21:58Z is 0aae52d4c). The MTP runs are those of three sweeps: 2026-01-14 (commit
bf3456727, "Add MTP Benchmark Support for DeepSeek-R1 TRT", changelog keys
``dsr1-fp4-b200-trt-mtp``, ``dsr1-fp8-b200-trt-mtp``, ``dsr1-fp8-h200-trt-mtp`` only; image
``1.1.0rc2.post2``, which the non-MTP runs of 2025-12 used too, so these are listed by record name
in :data:`MTP_JAN14`), 2026-02-05 (5d517074c, ``dsr1-fp8-b200-trt-mtp`` to image
``1.2.0rc6.post3``) and 2026-02-06 (0aae52d4c, ``dsr1-fp4-b200-trt-mtp`` to ``1.2.0rc6.post3``): up
to the sample's last file (2026-04-06) no other B200 DeepSeek-R1 TensorRT-LLM config ran
``1.2.0rc6.post3`` (the non-MTP ones ran ``1.2.0rc6.post2``), so that image marks the other two. No
single-node MTP recipe existed before 2026-01-14 (commit 294fe5f27 "remove MTP", 2025-09-07). Each
MTP script (``benchmarks/dsr1_fp4_b200_trt_mtp_slurm.sh`` at bf3456727,
``dsr1_fp8_b200_trt_mtp.sh`` at 5d517074c, ``dsr1_fp4_b200_trt_mtp.sh`` at 0aae52d4c) sets
``num_nextn_predict_layers`` 3, or 1 with attention DP, and starts ``trtllm-serve`` with
``--max_batch_size`` B = the concurrency (with attention DP: the concurrency / TP at bf3456727, / 8
for FP8 and / 4 for FP4 later, the concurrency itself below that) and ``--max_num_tokens`` ((k + 1)
B + ISL + 127) // 64 * 64, both per rank; the non-MTP scripts set ``max_num_tokens`` to at least
8192 and no ``max_batch_size``. Such a run gets ``mtp``: k, ``max_batch_size``: B,
``max_num_tokens`` (``validate/setup.py`` runs those limits; the draft tokens themselves are not
simulated), and loses ``batch_wait``, which the MTP scripts do not set (AIC-2744 and AIC-4644 had
carried it from the rule above).

KV memory fraction. Every InferenceX DeepSeek-R1 TensorRT-LLM script sets
``kv_cache_config.free_gpu_memory_fraction``, below the engine's 0.9: ``dsr1_fp4_b200_trt*.sh``
0.8 (every version from 9596d23d7, 2025-10-29, and the MTP scripts), ``dsr1_fp8_h200_trt*.sh``
0.75 (likewise), ``dsr1_fp8_b200_trt*.sh`` 0.8 until ec7bafaae (2026-01-29), which sets 0.7 at
1024/8192 with 256 or more clients and 0.75 at 8192/1024 on TP 4 (the runs on image
``1.2.0rc6.post2`` and later); its MTP version at 5d517074c 0.7 with attention DP, else 0.8. Each
InferenceX DeepSeek-R1 TensorRT-LLM run (``length_range_ratio`` set) on B200 or H200 gets
``free_gpu_memory_fraction`` (``validate/setup.py`` sizes its KV cache with it).

Token budget before 2026-01-21. Until InferenceX commit 64af5a771 (2026-01-21, "Adding evals after
throughput benchmarks") every DeepSeek-R1 TensorRT-LLM script (``dsr1_fp4_b200_trt_slurm.sh``,
``dsr1_fp8_b200_trt_slurm.sh``, ``dsr1_fp8_h200_trt_slurm.sh`` from 9596d23d7 on) started
``trtllm-serve`` with ``--max_num_tokens`` (C + ISL + 127) // 64 * 64 and no floor (that commit adds
the floor of 8192): room for one prompt beside C decodes, without chunking. The sample's non-MTP
InferenceX runs of those scripts on B200 and H200 are the ones on image ``1.1.0rc2.post2`` or with
no image stated (measured 2025-11-02 and 2025-12-15; the ``1.1.0rc2.post2`` runs of 2026-01-14 are
the MTP ones above); they get ``max_num_tokens``.

Twins whose InferenceX copy the import left out (vLLM and SGLang runs). The import kept only
some of the silicon sample's rows, so an older-name run can have its InferenceX twin in the sample
but not in measurements.csv, where :func:`twins` cannot see it: 23 SGLang DeepSeek-R1 runs
(``dsr1_h200_sglang_fp8_agg_..._cfg81``, ``dsr1_b200_sglang_fp{4,8}_agg_..._cfg{87,88,99,199,201}``,
imported as ``deepseek-v3`` fixed-length runs). In aiconfigurator's ``silicon_sample.csv``
(``aic-core/src/aiconfigurator_core/systems/``) each has the same part, engine, lengths,
``silicon_concurrency`` and TTFT and TPOT (every printed digit) as a ``2026_03_25_`` or
``2026_04_06_`` InferenceX record (:data:`SAMPLE_TWINS`), and the same ``measured=`` date and
image (``db-dump ... config_id=81; measured=2026-03-25; lmsysorg/sglang:v0.5.9-cu130`` beside
``source_file=2026-03-25.csv ... image=lmsysorg/sglang:v0.5.9-cu130``). Such a run gets
InferenceX's ``length_range_ratio`` 0.8 and ``inferencex_twin_record`` (the twin's record name);
the rules below (receive interval, KV dtype) then apply to it as to its twin. TensorRT-LLM runs of
the same kind (20 in the sample) are left to that engine's rules.

vLLM recipes: KV dtype and the gpt-oss MoE kernel. InferenceX's Llama-3.1-70B vLLM scripts
(``benchmarks/70b_fp8_h100_docker.sh`` / ``_slurm.sh``, ``70b_fp8_h200_slurm.sh``,
``70b_fp{4,8}_b200_docker.sh``, image ``vllm/vllm-openai:v0.10.2`` in
``.github/workflows/70b-tmpl.yml``) write ``kv-cache-dtype: fp8`` into the server's config in
every version from 2025-09-24 (the H100 ones from af4ccd03f, 2025-09-23) until 0b5620ec3
removed them (2025-10-29, "remove: llama 70b"; restored unchanged by c198b20eb and removed again
by 2582bce40); the sample's runs of them are
dated 2025-10-29 (``measured=``). Each InferenceX Llama-3.1-70B vLLM run gets ``kv_cache_dtype``
"fp8". The gpt-oss-120b B200 vLLM script (``benchmarks/gptoss_fp4_b200_docker.sh``, then
``gptoss_fp4_b200.sh`` and ``single_node/gptoss_fp4_b200.sh``) exports
``VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1`` from 5e92867f4 (2025-09-24) on: the experts run
FlashInfer's MXFP4 x MXFP8 kernel (W4A8), not vLLM's W4A16 default; it adds ``kv-cache-dtype:
fp8`` in 25506e87c (2025-12-05), kept through d2c2acb19 (2026-02-25, image ``v0.15.1``). So each
InferenceX gpt-oss-120b B200 vLLM run gets ``experts_compute`` "fp8", and those on image
``v0.15.1`` (engine ``vllm-0.15.1``, measured 2026-02-25) ``kv_cache_dtype`` "fp8" too (the one
without a version ran 2025-11-02). The H100 / H200 gpt-oss scripts set neither (Marlin W4A16,
``VLLM_MXFP4_USE_MARLIN=1``; 16-bit KV), which is what ``validate/setup.py`` runs already.
Every one of these scripts ran vLLM with async scheduling: ``async-scheduling: true`` in the
Llama-3.1-70B ones (as above) and in the gpt-oss ones from 2025-09-15 (H200, 77f238d12), 09-21
(B200, 27f29acbe, its first version) and 09-23 (H100, af4ccd03f) until d2c2acb19 (2026-02-25)
dropped the flag on moving to ``v0.15.1``, "Remove deprecated async-scheduling flag (default since
v0.14.0)" (its commit message and ``perf-changelog.yaml``; vLLM's
``SchedulerConfig.async_scheduling`` None = on where supported). So every InferenceX vLLM run of
the sample gets ``vllm_async_scheduling`` true (``sim/replica.py``, "Async scheduling"). The
Llama-3.1-70B FP8 KV is written only with ``--vllm-llama-kv`` (it lowers the stated TTFT's score,
docs/history/validation.md).

H200 SGLang launch flags. InferenceX's DeepSeek-R1 FP8 H200 SGLang script
(``benchmarks/dsr1_fp8_h200_slurm.sh``, later ``dsr1_fp8_h200.sh`` and
``single_node/dsr1_fp8_h200.sh``; at 41aff0afc, 2026-03-06, the version the sample's 2026-03-25
runs ran) starts the server with ``--disable-radix-cache --chunked-prefill-size 32768
--max-prefill-tokens 32768 --mem-fraction-static 0.82`` and ``--max-running-requests`` 512 at
1024/1024, 256 otherwise (``--cuda-graph-max-bs`` the same; ``--stream-interval 10``, which does
not delay the first token, above). Each InferenceX DeepSeek H200 SGLang run (or sample twin)
gets those five keys (``validate/setup.py`` ``sglang_launch``; with the client's
``--ignore-eos``, SGLang's ``add_one_req_ignore_eos`` admission).
Llama-3.1-70B on TensorRT-LLM. The sample dates every InferenceX Llama-3.1-70B run
``measured=2025-10-29`` (``2026_04_06_llama_3_1_70b_...``); InferenceX removed the 70B recipes on
2025-10-29/31 (b89047d5f, 026d16b82). From 1b563c858 (2025-09-18, "Update 70B TRT To use latest
container and flags", #20) to their removal, ``benchmarks/70b_fp4_b200_trt_slurm.sh``,
``70b_fp8_b200_trt_slurm.sh``, ``70b_fp8_h200_trt_slurm.sh`` (and the B200 ``_docker.sh`` copies,
identical there) start ``trtllm-serve`` with ``--max_num_tokens 16384`` and an extra config of
``kv_cache_config.dtype: fp8`` (what ``validate/setup.py`` takes for FP8/FP4 weights already),
``stream_interval: 10`` (the first token is sent at once: TTFT unchanged, ``sim/clients.py``) and,
for 1024/1024 at TP below 8, ``batch_wait_max_tokens_ratio: 0.9`` and
``batch_wait_timeout_iters: 20``. Each such run gets ``max_num_tokens`` 16384 and, there,
``batch_wait``: [20, 0.9].

gpt-oss-120b on TensorRT-LLM. The sample's InferenceX gpt-oss-120b TensorRT-LLM runs on B200 and
H200 are dated 2025-11-02 to 2026-02-05. Throughout (``benchmarks/gptoss_fp4_b200_trt_slurm.sh``
and ``gptoss_fp4_h200_trt_slurm.sh`` from ac1998a50, 2025-10-20, their ``_docker.sh`` copies and
the merged ``gptoss_fp4_{b200,h200}_trt.sh`` of b0c4ed21b, to 8d81e0bf4, 2026-02-19, which moved
them to ``benchmarks/single_node/``) the B200 script starts ``trtllm-serve --max_batch_size 512
--max_num_tokens 20000`` with ``kv_cache_config: dtype: fp8, free_gpu_memory_fraction: 0.85``, and
the H200 one ``--max_batch_size $CONC --max_num_tokens 20000`` with ``free_gpu_memory_fraction:
0.85`` and ``dtype: auto`` (the checkpoint's BF16, already ``validate/setup.py``'s). Each such run
gets ``max_batch_size``, ``max_num_tokens``, ``free_gpu_memory_fraction`` and, on B200,
``kv_cache_dtype`` "fp8". Not carried: ``stream_interval: 20`` (first token at once) and
``num_postprocess_workers: 4``.

Only the ``extra`` cell of a row changes; the file is otherwise left byte for byte as it is.
Running it again changes nothing.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

CSV = Path(__file__).resolve().parents[1] / "src" / "infercast" / "data" / "measurements.csv"
SOURCE = "aiconfigurator-silicon-sample"
COPIED = ("length_range_ratio", "scheduler_recv_interval")


def _runs(rows: list[dict]) -> dict[str, dict[str, dict]]:
    runs: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        if r["source"] == SOURCE:
            runs[r["id"].rsplit("-", 1)[0]][r["metric"]] = r
    return runs


def _signature(run: dict[str, dict]) -> tuple | None:
    t, p = run.get("ttft_mean_s"), run.get("tpot_mean_s")
    if t is None or p is None:
        return None
    return (
        t["scenario"],
        t["input_tokens"],
        t["output_tokens"],
        t["concurrency"],
        t["value"],
        p["value"],
    )


def twins(rows: list[dict]) -> dict[str, dict]:
    """Unannotated run id -> the keys to add to its rows' ``extra``."""
    runs = _runs(rows)
    annotated, plain = defaultdict(list), defaultdict(list)
    for base, run in runs.items():
        sig = _signature(run)
        if sig is None:
            continue
        extra = json.loads(run["ttft_mean_s"]["extra"] or "{}")
        (annotated if "length_range_ratio" in extra else plain)[sig].append(base)
    out = {}
    for sig, bases in plain.items():
        if sig not in annotated:
            continue
        extras = [json.loads(runs[b]["ttft_mean_s"]["extra"]) for b in annotated[sig]]
        add = {"inferencex_twin": sorted(annotated[sig])[0]}
        for key in COPIED:
            values = {json.dumps(e.get(key)) for e in extras}
            if len(values) == 1 and extras[0].get(key) is not None:
                add[key] = extras[0][key]
        for b in bases:
            out[b] = add
    return out


SAMPLE_TWINS = {  # older-name run -> its InferenceX twin in the silicon sample (module docstring)
    "dsr1_h200_sglang_fp8_agg_1024x1024_c16_cfg81": (
        "2026_03_25_deepseek_r1_h200_sxm_sglang_fp8_agg_1024x1024_c16_tp8_0_ep1_0_285"
    ),
    "dsr1_h200_sglang_fp8_agg_1024x8192_c8_cfg81": (
        "2026_03_25_deepseek_r1_h200_sxm_sglang_fp8_agg_1024x8192_c8_tp8_0_ep1_0_299"
    ),
    "dsr1_h200_sglang_fp8_agg_8192x1024_c4_cfg81": (
        "2026_03_25_deepseek_r1_h200_sxm_sglang_fp8_agg_8192x1024_c4_tp8_0_ep1_0_268"
    ),
    "dsr1_h200_sglang_fp8_agg_8192x1024_c8_cfg81": (
        "2026_04_06_deepseek_r1_h200_sxm_sglang_fp8_agg_8192x1024_c8_tp8_ep1_81"
    ),
    "dsr1_h200_sglang_fp8_agg_8192x1024_c64_cfg81": (
        "2026_03_25_deepseek_r1_h200_sxm_sglang_fp8_agg_8192x1024_c64_tp8_0_ep1_0_305"
    ),
    "dsr1_h200_sglang_fp8_agg_1024x1024_c32_cfg81": (
        "2026_03_25_deepseek_r1_h200_sxm_sglang_fp8_agg_1024x1024_c32_tp8_0_ep1_0_315"
    ),
    "dsr1_h200_sglang_fp8_agg_1024x8192_c32_cfg81": (
        "2026_04_06_deepseek_r1_h200_sxm_sglang_fp8_agg_1024x8192_c32_tp8_ep1_874"
    ),
    "dsr1_b200_sglang_fp4_agg_1024x8192_c4_cfg201": (
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x8192_c4_tp8_ep8_1027"
    ),
    "dsr1_b200_sglang_fp4_agg_1024x1024_c64_cfg201": (
        "2026_03_25_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c64_tp8_0_ep8_0_271"
    ),
    "dsr1_b200_sglang_fp4_agg_1024x8192_c128_cfg201": (
        "2026_03_25_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x8192_c128_tp8_0_ep8_0_259"
    ),
    "dsr1_b200_sglang_fp4_agg_1024x1024_c32_cfg201": (
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c32_tp8_ep8_1016"
    ),
    "dsr1_b200_sglang_fp8_agg_1024x8192_c64_cfg87": (
        "2026_03_25_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x8192_c64_tp8_0_ep1_0_261"
    ),
    "dsr1_b200_sglang_fp4_agg_1024x1024_c8_cfg88": (
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c8_tp4_ep1_84"
    ),
    "dsr1_b200_sglang_fp4_agg_8192x1024_c16_cfg88": (
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_8192x1024_c16_tp4_ep1_578"
    ),
    "dsr1_b200_sglang_fp4_agg_1024x1024_c32_cfg88": (
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c32_tp4_ep1_212"
    ),
    "dsr1_b200_sglang_fp4_agg_1024x8192_c128_cfg88": (
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x8192_c128_tp4_ep1_889"
    ),
    "dsr1_b200_sglang_fp4_agg_1024x1024_c64_cfg88": (
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c64_tp4_ep1_171"
    ),
    "dsr1_b200_sglang_fp4_agg_8192x1024_c4_cfg99": (
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_8192x1024_c4_tp8_ep1_78"
    ),
    "dsr1_b200_sglang_fp4_agg_1024x8192_c8_cfg99": (
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x8192_c8_tp8_ep1_23"
    ),
    "dsr1_b200_sglang_fp4_agg_1024x8192_c32_cfg99": (
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x8192_c32_tp8_ep1_883"
    ),
    "dsr1_b200_sglang_fp8_agg_1024x8192_c64_cfg199": (
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x8192_c64_tp8_ep8_1052"
    ),
    "dsr1_b200_sglang_fp8_agg_1024x8192_c32_cfg199": (
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x8192_c32_tp8_ep8_1031"
    ),
    "dsr1_b200_sglang_fp8_agg_1024x8192_c16_cfg199": (
        "2026_04_06_deepseek_r1_b200_sxm_sglang_fp8_agg_1024x8192_c16_tp8_ep8_1032"
    ),
}


def sample_twin(row: dict, extra: dict) -> dict:
    """The keys of a vLLM or SGLang run whose InferenceX twin is in the sample only (docstring)."""
    if row["source"] != SOURCE or row["scenario"] != "concurrency" or "length_range_ratio" in extra:
        return {}
    twin = SAMPLE_TWINS.get(_record(row))
    if twin is None or not row["engine"].startswith(("sglang", "vllm")):
        return {}
    return {"length_range_ratio": 0.8, "inferencex_twin_record": twin}


ADP_BALANCE = {  # model -> the recipe's [timeout_iters, batching_wait_iters] (module docstring)
    "deepseek-r1": [60, 0],
    "deepseek-v3": [60, 0],
    "gpt-oss-120b": [50, 10],
}


def adp_balance(row: dict, extra: dict) -> dict:
    """The attention-DP balance keys an InferenceX TensorRT-LLM row with attention DP gets."""
    if row["source"] != SOURCE or row["scenario"] != "concurrency":
        return {}  # the aggregated recipes above (disaggregated ones run other configs)
    if "length_range_ratio" not in extra:
        return {}
    if not row["engine"].startswith("trtllm") or row["model"] not in ADP_BALANCE:
        return {}
    tp, pp, ep = (int(row[k] or 1) for k in ("tp", "pp", "ep"))
    return {"attention_dp_balance": ADP_BALANCE[row["model"]]} if ep > tp * pp else {}


NAME_TPEP = re.compile(r"_tp(\d+)_ep(\d+)_\d+$")  # the 2026_04_06 record names
NAME_CFG = re.compile(r"_cfg(\d+)$")  # aiconfigurator's older record names


def _record(row: dict) -> str:
    return row["citation"].rsplit(" row ", 1)[-1]


def _dsr1(row: dict) -> bool:
    """A DeepSeek-R1 run by its record name (older ``dsr1_...`` names were imported as V3)."""
    name = _record(row)
    return "deepseek_r1" in name or name.startswith("dsr1_")


def _ran(row: dict) -> int | None:
    """X for an aggregated run named ``_tpX_epX_`` (X > 1) that states X * X GPUs, else None."""
    m = NAME_TPEP.search(_record(row))
    if row["source"] != SOURCE or row["scenario"] != "concurrency" or not m:
        return None
    x, ep = int(m[1]), int(m[2])
    return x if x == ep > 1 and row["n_gpus"] == str(x * x) else None


def gpus_ran(rows: list[dict], twin_of: dict[str, str]) -> dict[str, int]:
    """Run id -> the GPUs it ran on, for runs whose ``n_gpus`` counts them twice (docstring);
    ``twin_of``: run id -> its InferenceX twin's run id."""
    by_run = {r["id"].rsplit("-", 1)[0]: r for r in rows if r["metric"] == "ttft_mean_s"}
    out = {b: x for b, r in by_run.items() if (x := _ran(r)) is not None}
    configs: dict[tuple, set[int]] = defaultdict(set)
    members: dict[tuple, list[str]] = defaultdict(list)
    for base, r in by_run.items():
        m = NAME_CFG.search(_record(r))
        if r["source"] != SOURCE or r["scenario"] != "concurrency" or not m:
            continue
        key = (m[1], r["hardware"], r["engine"])
        members[key].append(base)
        twin = twin_of.get(base)
        if twin in by_run and twin in out:
            configs[key].add(out[twin])
        elif twin in by_run and by_run[twin]["n_gpus"] != r["n_gpus"]:
            configs[key].add(int(by_run[twin]["n_gpus"]))
    for key, counts in configs.items():
        if len(counts) == 1:
            (x,) = counts
            for base in members[key]:
                if int(by_run[base]["n_gpus"] or 0) == x * x:
                    out[base] = x
    return out


BATCH_WAIT = [40, 0.8]  # dsr1_fp8_b200_trt.sh: batch_wait_timeout_iters, _max_tokens_ratio


def batch_wait(row: dict) -> dict:
    """The batch-waiting key a DeepSeek-R1 FP8 B200 TensorRT-LLM 1k/1k row gets (docstring)."""
    if row["source"] != SOURCE or row["scenario"] != "concurrency":
        return {}
    name = row["citation"].rsplit(" row ", 1)[-1]
    if not row["engine"].startswith("trtllm-1.2.0rc6") or not name.startswith(
        ("dsr1_", "2026_03_25_deepseek_r1_", "2026_04_06_deepseek_r1_")
    ):
        return {}  # older names (dsr1_...) were imported as deepseek-v3: the name says R1
    if (row["hardware"], row["weights"], row["input_tokens"], row["output_tokens"]) != (
        "b200",
        "fp8",
        "1024",
        "1024",
    ) or int(row["concurrency"]) < 64:
        return {}
    tp, pp, ep = (int(row[k] or 1) for k in ("tp", "pp", "ep"))
    return {"batch_wait": BATCH_WAIT} if ep <= tp * pp else {}


MTP_JAN14 = (  # the sample's runs measured 2026-01-14 (InferenceX bf3456727's sweep): record names
    "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c128_tp4_ep4_958",
    "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c16_tp4_ep4_1553",
    "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c32_tp4_ep4_1588",
    "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp4_agg_1024x1024_c8_tp8_ep1_36",
    "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp8_agg_1024x8192_c32_tp8_ep8_925",
    "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp8_agg_8192x1024_c16_tp8_ep8_967",
    "2026_04_06_deepseek_r1_b200_sxm_trtllm_fp8_agg_8192x1024_c4_tp8_ep8_920",
    "2026_04_06_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c32_tp8_ep8_922",
    "2026_04_06_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c64_tp8_ep8_953",
    "2026_04_06_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c8_tp8_ep8_957",
    "2026_04_06_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x8192_c8_tp8_ep8_977",
    "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c256_tp8_0_ep8_0_1259",
    "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x1024_c4_tp8_0_ep8_0_1252",
    "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_1024x8192_c32_tp8_0_ep8_0_1243",
    "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_8192x1024_c256_tp8_0_ep8_0_1251",
    "2026_03_25_deepseek_r1_h200_sxm_trtllm_fp8_agg_8192x1024_c32_tp8_0_ep8_0_1247",
)
MTP_IMAGE = "trtllm-1.2.0rc6.post3"  # the B200 -mtp configs' image from 2026-02-05/06 (docstring)


def mtp_recipe(row: dict) -> dict:
    """The MTP keys of an InferenceX DeepSeek-R1 TensorRT-LLM MTP run (module docstring), with
    ``batch_wait`` set to None (removed); {} for any other row."""
    name = _record(row)
    if row["source"] != SOURCE or row["scenario"] != "concurrency" or not _dsr1(row):
        return {}
    if name in MTP_JAN14:
        divisor = None  # --max_batch_size = concurrency / TP with attention DP
    elif row["engine"] == MTP_IMAGE and row["hardware"] == "b200":
        divisor = 8 if row["weights"] == "fp8" else 4
    else:
        return {}
    tp, pp, ep = (int(row[k] or 1) for k in ("tp", "pp", "ep"))
    conc, isl = int(row["concurrency"]), int(row["input_tokens"])
    dp = ep > tp * pp  # the layout rule of validate/setup.py; InferenceX's DP runs have TP = EP
    k = 1 if dp else 3
    if not dp:
        b = conc
    elif divisor is None:
        b = conc // ep
    else:
        b = conc if conc < divisor else conc // divisor
    return {
        "mtp": k,
        "max_batch_size": b,
        "max_num_tokens": ((k + 1) * b + isl + 64 + 63) // 64 * 64,
        "batch_wait": None,
    }


def free_fraction(row: dict, extra: dict) -> dict:
    """The KV memory fraction key of an InferenceX DeepSeek-R1 TensorRT-LLM run (docstring)."""
    if row["source"] != SOURCE or row["scenario"] != "concurrency" or not _dsr1(row):
        return {}
    if not row["engine"].startswith("trtllm") or "length_range_ratio" not in extra:
        return {}
    if row["hardware"] == "h200-sxm":
        return {"free_gpu_memory_fraction": 0.75}
    if row["hardware"] != "b200":
        return {}
    tp, pp, ep = (int(row[k] or 1) for k in ("tp", "pp", "ep"))
    conc, isl, osl = (int(row[k]) for k in ("concurrency", "input_tokens", "output_tokens"))
    fraction = 0.8
    if row["weights"] == "fp8" and row["engine"].startswith("trtllm-1.2.0rc6"):
        if extra.get("mtp"):  # dsr1_fp8_b200_trt_mtp.sh at 5d517074c
            fraction = 0.7 if ep > tp * pp else 0.8
        elif (isl, osl) == (1024, 8192) and conc >= 256:  # dsr1_fp8_b200_trt.sh at ec7bafaae
            fraction = 0.7
        elif (isl, osl) == (8192, 1024) and tp * pp == 4:
            fraction = 0.75
    return {"free_gpu_memory_fraction": fraction}


def early_budget(row: dict, extra: dict) -> dict:
    """The token budget of an InferenceX DeepSeek-R1 TensorRT-LLM run from before 2026-01-21
    (module docstring, "Token budget before 2026-01-21")."""
    if row["source"] != SOURCE or row["scenario"] != "concurrency" or not _dsr1(row):
        return {}
    if "length_range_ratio" not in extra or "mtp" in extra:
        return {}
    if row["hardware"] not in ("b200", "h200-sxm"):
        return {}
    if row["engine"] != "trtllm-" and not row["engine"].startswith("trtllm-1.1.0rc2"):
        return {}
    conc, isl = int(row["concurrency"]), int(row["input_tokens"])
    return {"max_num_tokens": (conc + isl + 64 + 63) // 64 * 64}


LLAMA70B_BUDGET = 16384  # 70b_*_trt_*.sh: trtllm-serve --max_num_tokens (module docstring)
LLAMA70B_WAIT = [20, 0.9]  # the same: batch_wait_timeout_iters, batch_wait_max_tokens_ratio


def llama70b_trtllm(row: dict, extra: dict) -> dict:
    """The launch keys of an InferenceX Llama-3.1-70B TensorRT-LLM run (module docstring,
    "Llama-3.1-70B on TensorRT-LLM"): the token budget; batch waiting at 1k/1k below TP 8."""
    if row["source"] != SOURCE or row["scenario"] != "concurrency":
        return {}
    if row["model"] != "llama-3.1-70b" or not row["engine"].startswith("trtllm"):
        return {}
    if "length_range_ratio" not in extra or row["hardware"] not in ("b200", "h200-sxm"):
        return {}
    add: dict = {"max_num_tokens": LLAMA70B_BUDGET}
    lengths = (row["input_tokens"], row["output_tokens"])
    if lengths == ("1024", "1024") and int(row["tp"] or 1) < 8:  # the script's ${TP} -lt 8
        add["batch_wait"] = LLAMA70B_WAIT
    return add


GPTOSS_TRT = {  # gptoss_fp4_{b200,h200}_trt*.sh: the launch keys (module docstring); None: C
    "b200": dict(max_batch_size=512, max_num_tokens=20000, free_gpu_memory_fraction=0.85),
    "h200-sxm": dict(max_batch_size=None, max_num_tokens=20000, free_gpu_memory_fraction=0.85),
}


def gptoss_trtllm(row: dict, extra: dict) -> dict:
    """The launch keys of an InferenceX gpt-oss-120b TensorRT-LLM run (module docstring,
    "gpt-oss-120b on TensorRT-LLM")."""
    if row["source"] != SOURCE or row["scenario"] != "concurrency":
        return {}
    if row["model"] != "gpt-oss-120b" or not row["engine"].startswith("trtllm"):
        return {}
    if "length_range_ratio" not in extra or row["hardware"] not in GPTOSS_TRT:
        return {}
    add = dict(GPTOSS_TRT[row["hardware"]])
    if add["max_batch_size"] is None:
        add["max_batch_size"] = int(row["concurrency"])
    if row["hardware"] == "b200":
        add["kv_cache_dtype"] = "fp8"
    return add


def kv_cache_dtype(row: dict, extra: dict) -> dict:
    """The KV dtype key an InferenceX DeepSeek-R1 B200 SGLang row gets (module docstring)."""
    if row["source"] != SOURCE or row["scenario"] != "concurrency" or row["kv_cache"]:
        return {}
    if not row["engine"].startswith("sglang") or row["hardware"] != "b200":
        return {}
    return {"kv_cache_dtype": "fp8"} if "scheduler_recv_interval" in extra else {}


def _b200_dsr1_sglang(row: dict, extra: dict) -> bool:
    """An InferenceX single-node DeepSeek-R1 B200 SGLang run (or its twin): module docstring."""
    return (
        row["source"] == SOURCE
        and row["scenario"] == "concurrency"
        and row["engine"].startswith("sglang")
        and row["hardware"] == "b200"
        and row["model"].startswith("deepseek")
        and "length_range_ratio" in extra
    )


def recv_interval(row: dict, extra: dict) -> dict:
    """``scheduler_recv_interval`` for such a run that lacks it (the ``_tpX_epX_`` runs the first
    annotation left out): 30 at 16 or more clients, else 10; 10 for the FP8 TP 4 recipe."""
    if not _b200_dsr1_sglang(row, extra) or "scheduler_recv_interval" in extra:
        return {}
    tp = int(extra.get("n_gpus_ran") or row["tp"] or 1)
    fp8_tp4 = row["weights"] == "fp8" and tp == 4
    return {"scheduler_recv_interval": 30 if int(row["concurrency"]) >= 16 and not fp8_tp4 else 10}


SGLANG_FLAGS = {  # (weights, TP) -> the launch flags of the recipe (module docstring)
    ("fp4", 4): dict(
        mem_fraction_static=0.85, chunked_prefill_size=16384, max_running_requests=256
    ),
    ("fp4", 8): dict(
        mem_fraction_static=0.85, chunked_prefill_size=16384, max_running_requests=256
    ),
    ("fp8", 8): dict(
        mem_fraction_static=0.82,
        chunked_prefill_size=32768,
        max_prefill_tokens=32768,
        max_running_requests=128,
    ),
    ("fp8", 4): dict(
        mem_fraction_static=0.95,
        chunked_prefill_size=8192,
        max_prefill_tokens=8192,
        max_running_requests=32,
    ),
}


def sglang_flags(row: dict, extra: dict) -> dict:
    """The launch flags such a run's recipe set (module docstring); ``max_running_requests`` only
    where the run's clients fit in it (the recipe sets it to the largest concurrency it runs)."""
    if not _b200_dsr1_sglang(row, extra):
        return {}
    tp = int(extra.get("n_gpus_ran") or row["tp"] or 1)
    flags = dict(SGLANG_FLAGS.get((row["weights"], tp), {}))
    if not flags:
        return {}
    if int(row["concurrency"]) > flags["max_running_requests"]:
        del flags["max_running_requests"]
    return flags | {"sglang_disable_radix_cache": True}


def vllm_recipe(row: dict, extra: dict, llama_kv: bool = False) -> dict:
    """The async scheduling, KV dtype and MoE kernel keys of an InferenceX vLLM run (module
    docstring, "vLLM recipes"); the Llama-3.1-70B FP8 KV only with ``llama_kv`` (not shipped)."""
    if row["source"] != SOURCE or row["scenario"] != "concurrency":
        return {}
    if not row["engine"].startswith("vllm") or "length_range_ratio" not in extra:
        return {}
    add: dict = {"vllm_async_scheduling": True}
    if row["kv_cache"]:
        return add
    if row["model"] == "llama-3.1-70b":
        return add | ({"kv_cache_dtype": "fp8"} if llama_kv else {})
    if row["model"] != "gpt-oss-120b" or row["hardware"] != "b200":
        return add
    add["experts_compute"] = "fp8"
    return add | ({"kv_cache_dtype": "fp8"} if row["engine"] == "vllm-0.15.1" else {})


def h200_sglang_flags(row: dict, extra: dict) -> dict:
    """The launch flags of InferenceX's DeepSeek-R1 H200 SGLang script (module docstring, "H200
    SGLang launch flags") for an InferenceX run (or sample twin) of it."""
    if row["source"] != SOURCE or row["scenario"] != "concurrency":
        return {}
    if not row["engine"].startswith("sglang") or row["hardware"] != "h200-sxm":
        return {}
    if not row["model"].startswith("deepseek") or "length_range_ratio" not in extra:
        return {}
    one_k = (row["input_tokens"], row["output_tokens"]) == ("1024", "1024")
    return {
        "mem_fraction_static": 0.82,
        "chunked_prefill_size": 32768,
        "max_prefill_tokens": 32768,
        "max_running_requests": 512 if one_k else 256,
        "sglang_disable_radix_cache": True,
    }


def _extra_cell(extra: dict) -> str:
    return '"' + json.dumps(extra, separators=(",", ":")).replace('"', '""') + '"'


def read_measurements() -> str:
    """The shipped CSV's text, its own line ends kept."""
    with CSV.open(encoding="utf-8", newline="") as f:
        return f.read()


def save_measurements(text: str, changed: int, write: bool) -> None:
    """Write ``text`` back when asked and something changed."""
    if write and changed:
        with CSV.open("w", encoding="utf-8", newline="") as f:
            f.write(text)
        print(f"wrote {CSV.name}")


def rewrite_extras(text: str, keys: Callable[[dict, dict], dict]) -> tuple[str, int]:
    """``text`` (the CSV, CRLF rows) with each row's ``extra`` cell given ``keys(row, extra)`` (a
    key whose value is None is removed); every other byte kept. Returns the new text and the
    rows changed (0: nothing to add)."""
    by_id = {r["id"]: r for r in csv.DictReader(text.splitlines())}
    lines = text.split("\r\n")
    changed = 0
    for i, line in enumerate(lines):
        row = by_id.get(line.split(",", 1)[0])
        if row is None:
            continue
        extra = json.loads(row["extra"] or "{}")
        add = keys(row, extra)
        if all(extra.get(k) == v for k, v in add.items()):
            continue
        old = _extra_cell(extra) if row["extra"] else ""
        assert line.endswith("," + old), row["id"]  # the extra cell is the last one
        new = {k: v for k, v in (extra | add).items() if v is not None}  # None removes a key
        lines[i] = line[: len(line) - len(old)] + (_extra_cell(new) if new else "")
        changed += 1
    return "\r\n".join(lines), changed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="annotate the twins in the file")
    ap.add_argument(
        "--sglang-flags",
        action="store_true",
        help="also the SGLang launch flags (not shipped: docs/history/validation.md, issue 15)",
    )
    ap.add_argument(
        "--vllm-llama-kv",
        action="store_true",
        help="also the Llama-3.1-70B vLLM runs' FP8 KV (not shipped: docs/history/validation.md)",
    )
    args = ap.parse_args()
    text = read_measurements()
    rows = list(csv.DictReader(text.splitlines()))
    found = twins(rows)
    twin_of = {
        r["id"].rsplit("-", 1)[0]: e["inferencex_twin"]
        for r in rows
        if "inferencex_twin" in (e := json.loads(r["extra"] or "{}"))
    }
    twin_of |= {b: a["inferencex_twin"] for b, a in found.items()}
    ran = gpus_ran(rows, twin_of)

    def keys(row: dict, extra: dict) -> dict:
        base = row["id"].rsplit("-", 1)[0]
        add = dict(found.get(base, {}))
        add |= sample_twin(row, extra | add)
        add |= adp_balance(row, extra | add)
        if base in ran:
            add["n_gpus_ran"] = ran[base]
        add |= batch_wait(row)
        add |= recv_interval(row, extra | add)
        add |= mtp_recipe(row)
        add |= free_fraction(row, extra | add)
        add |= early_budget(row, extra | add)
        add |= kv_cache_dtype(row, extra | add)
        add |= vllm_recipe(row, extra | add, args.vllm_llama_kv)
        add |= h200_sglang_flags(row, extra | add)
        add |= llama70b_trtllm(row, extra | add)
        add |= gptoss_trtllm(row, extra | add)
        return add | sglang_flags(row, extra | add) if args.sglang_flags else add

    text, changed = rewrite_extras(text, keys)
    for base, add in sorted(found.items()):
        print(base, "->", add)
    for base, x in sorted(ran.items()):
        print(base, "-> n_gpus_ran", x)
    print(f"{len(found)} twin runs, {len(ran)} runs on fewer GPUs; {changed} rows to change in all")
    save_measurements(text, changed, args.write)


if __name__ == "__main__":
    main()
