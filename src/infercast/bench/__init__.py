"""``infercast bench``: a load generator for OpenAI-compatible servers that measures correctly.

Data flow (one module per step)::

    datasets.py  RequestSpec (prompt, lengths, trace arrival)
    load.py      arrival schedule / closed loop -> when each request is sent
    client.py    aiohttp streaming request -> RequestRecord (sse.py splits stamped bytes)
    run.py       BenchConfig -> BenchResult (metrics.summary.Summary + client diagnostics)
    jsonl.py     per-request JSONL;  compare.py  the simulator on the same workload
    (its tables and plots: ``report/bench_tables.py``, ``report/bench_plots.py``)
    mock.py      a timing mock server whose truth is known (``infercast mock-server``)

Metric definitions: ``docs/metrics.md``.
"""
