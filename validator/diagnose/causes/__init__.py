"""Every diagnose rule, in one table.

A rule is one function with one signature, ``Evidence`` in, candidate ``Cause``s out
(``base.Rule``); each looks at one kind of evidence and gives its causes a level of
``diagnose/strength.py``. ``verdict.decide`` runs every rule of ``CAUSES`` in this order, sorts the
candidates by strength, then confidence, then this order, and lets independent evidence
corroborate the strongest. To add a rule: docs/architecture.md, "Where to add a diagnose rule".
"""

from __future__ import annotations

from validator.diagnose.causes.base import Evidence, Rule
from validator.diagnose.causes.collective import (
    desync,
    detail_mismatch,
    horovod,
    mismatch_pointer,
    monitored_peer,
    peers_behind,
    size_mismatch,
    uniqueid,
    watchdog,
)
from validator.diagnose.causes.failures import origins, signalled, stopped
from validator.diagnose.causes.hangs import different_waits, silent_ranks
from validator.diagnose.causes.launch import summaries
from validator.diagnose.causes.net import (
    connect_retries,
    earliest_error,
    nccl_cuda,
    network,
    oneccl,
    ras,
    timeouts_only,
    unrecognised,
    versions,
)
from validator.diagnose.causes.recorded import coll_history, flight_recorder, p2p, trace_endings, traces
from validator.diagnose.causes.startup import (
    addr_in_use,
    duplicate_gpu,
    jax_barrier,
    launch_contract,
    nccl_versions,
    no_interface,
    store,
    store_barrier,
)

CAUSES: tuple[Rule, ...] = (
    # recorded call histories: what every rank called
    traces,
    flight_recorder,
    trace_endings,
    p2p,
    coll_history,
    # what the ranks, NCCL and the store report
    detail_mismatch,
    desync,
    stopped,
    uniqueid,
    mismatch_pointer,
    store_barrier,
    jax_barrier,
    ras,
    horovod,
    versions,
    size_mismatch,
    monitored_peer,
    peers_behind,
    duplicate_gpu,
    nccl_versions,
    no_interface,
    addr_in_use,
    launch_contract,
    store,
    # who failed first, by their own errors, the launcher's summary, the watchdog, the silence
    origins,
    summaries,
    watchdog,
    different_waits,
    silent_ranks,
    # the class without a culprit, and the last resorts
    nccl_cuda,
    oneccl,
    network,
    timeouts_only,
    connect_retries,
    signalled,
    earliest_error,
    unrecognised,
)

# Rules that read evidence an earlier rule reads too (the watchdog's silent ranks, the ranks' waits): a
# cause of theirs with the code and ranks of an earlier candidate is that candidate again, not a corroboration.
RESTATING: frozenset[Rule] = frozenset({different_waits, silent_ranks})

__all__ = ["CAUSES", "RESTATING", "Evidence", "Rule"]
