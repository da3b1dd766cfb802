"""Post-mortem of a failed distributed run: logs, Flight Recorder dumps and rehearsal traces of
all ranks -> one verdict (failure class, initiating rank and host, collateral ranks, evidence).

Stages: ``inputs`` (paths, .gz, sniffing) -> ``scan`` (streaming, anchor-filtered lines) ->
``logs`` (prefixes, timestamps) -> ``classify`` (events) -> ``ranks`` (who said it) ->
``flightrec`` / ``tracefile`` + ``sequences`` (collective histories by majority) -> ``causes`` (the
rule table) -> ``verdict`` (gather, sort, corroborate) -> ``report`` (findings). ``run.diagnose_paths`` is the one place where they meet.
"""
