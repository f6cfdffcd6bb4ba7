"""Applications: what a user runs, each on top of the flow and none inside it.

``certify`` (the engine's own front-end), ``explore`` (``qconform explore promote``; the pytest plugin,
its report and exploration hooks included, is ``qconform.plugin``, the ``pytest11`` entry point),
``findings`` (upstream-ready reproducers), ``scoreboard`` (every bundled runtime compared),
``facts_drift`` (what changed in a runtime since its facts were measured) and ``backend_export``
(the corpus in ONNX's backend-test layout). They read reports, facts and the corpus and judge
cases only through ``qconform.execution``; ``qconform.report`` only writes reports.
"""
