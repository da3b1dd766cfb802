#!/bin/sh
# slurm.conf: Prolog=/etc/slurm/prolog.d/validator.sh   (runs as root before each job on the node)
# A node that fails its profile is drained with a short reason (sinfo -R) and the job requeued;
# the validator's own errors (bad profile, time budget exceeded, a bug) are logged and never fail the job.
exec /opt/cluster-validator/bin/validator node-check --mode slurm-prolog --drain \
    --profile /etc/cluster-validator/profile.yaml \
    2>>/var/log/cluster-validator-prolog.log
