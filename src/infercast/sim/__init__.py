"""Discrete-event serving simulator: workload -> router -> replicas (shared scheduler + cost model).

Entry points: :func:`infercast.sim.run.simulate` (library), ``infercast simulate``
(CLI), :func:`infercast.sim.workload.load_trace` (traces). See ``docs/simulator.md``.
"""
