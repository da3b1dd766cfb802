"""The net check, one for `validator scan --net-check` and `validator preflight --net-check`.

    probe.py    the node side (standard library only): a listener that answers with a token and
                serves latency and bulk requests, and a prober that connects and measures
    ring.py     who probes whom (two rings and the first node)
    sweep.py    with --net-check-pairs all: every pair off the rings, in rounds of disjoint pairs
    pairing.py  after the rings: each suspect link a bad link or a bad node (pairs with
                known-good nodes, in rounds of disjoint pairs)
    verdict.py  NET1xx findings from the results (unreachable, cannot listen, not run, slow
                link, slow node)

The address probed on each node is the one NCCL (a GPU job) or Gloo would use there:
``facts.network.uses_nccl`` decides which library for the whole job (the same rule as the
checks' ``Job.uses_gpus``) and ``facts.network.chosen`` gives that library's address. The
caller (scan's transports, the preflight coordinator) starts the listeners and runs a round
of probes; ``rounds.run`` decides the rounds. Importing this package imports nothing: a
preflight participant loads probe.py alone.
"""
