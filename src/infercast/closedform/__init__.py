"""Closed-form serving models: a closed loop of clients on one continuous-batching replica
(:mod:`~infercast.closedform.steady`) and on disaggregated prefill/decode pools
(:mod:`~infercast.closedform.disagg`).

Each one turns a handful of step times (of the :data:`~infercast.closedform.shape.Shape` s
it asks for, timed by any cost model) into TTFT, TPOT and throughput, in microseconds
rather than a simulation's seconds. ``validate`` predicts its closed-loop rows with them;
they sit below ``sim/`` and ``plan/`` so that any layer that times steps can use them.
"""
