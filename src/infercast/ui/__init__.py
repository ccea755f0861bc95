"""``infercast ui``: a local what-if page over the same Python API the CLI calls.

The server (:mod:`infercast.ui.app`, FastAPI) turns each form into the library
call the matching command makes (:func:`infercast.estimate.estimate`,
:func:`infercast.sim.run.simulate`, :func:`infercast.plan.plan`,
:class:`infercast.validate.evaluate.Evaluator`) and returns that call's own
numbers as JSON; the client (``static/``: plain HTML, CSS and JS modules with a
vendored uPlot) only draws them. No number is computed twice.
"""
