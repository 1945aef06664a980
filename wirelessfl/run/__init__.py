"""What a run is made of, one concern a module, under the thin orchestrator ``wirelessfl.simulate``.

``curves`` (what a scenario trains), ``seeds`` (where draws come from),
``evaluation`` (a round's record), ``keys`` (a unit's name and stamp),
``clock`` and ``ledger`` (simulated time and batteries), ``walltime`` (where the
wall time went), ``followers`` (curves that train alike train once), ``unit``
(one curve x seed: the round loop), ``build`` and ``preflight`` (making units and
refusing bad ones), ``rows`` (a unit's tables), ``checkpoints``, ``folder`` and
``extend`` (resumption), ``prepare`` (the one door both the CLI and the Python API
go through before a run writes or allocates anything). Nothing is re-exported here,
so importing one module loads only what it needs.
"""
