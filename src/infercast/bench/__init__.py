"""``infercast bench``: a load generator for OpenAI-compatible servers that measures correctly.

Data flow (one module per step)::

    datasets.py  RequestSpec (prompt, lengths, trace arrival)
    load.py      arrival schedule / closed loop -> when each request is sent
    client.py    aiohttp streaming request -> RequestRecord (sse.py splits stamped bytes)
    run.py       BenchConfig -> BenchResult (metrics.summary.Summary + client diagnostics)
    report.py    Rich table, JSONL, plots;  compare.py  the simulator on the same workload
    mock.py      a timing mock server whose truth is known (``infercast mock-server``)

Metric definitions: ``docs/metrics.md``.
"""
