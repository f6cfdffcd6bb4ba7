"""What both front-ends -- the pytest plugin (``qconform.plugin``) and ``qconform certify``
(``qconform.apps.certify``) -- share to turn a run's records into a report and a verdict, below either
of them: ``assembly`` (report.json assembled: the records, the diagnosis's ranking, the
characterisation, the gate) and ``baseline`` (the known deviations of ``--baseline=FILE`` and the
run's gate). No command line: ``qconform baseline create|refresh`` is ``qconform.apps.baseline``.
"""
