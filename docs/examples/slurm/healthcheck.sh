#!/bin/sh
# slurm.conf: HealthCheckProgram=/etc/slurm/validator-healthcheck.sh  HealthCheckInterval=300
# Slurm ignores a health check's exit code: --drain makes the check drain the node itself, and
# --resume brings back a node it drained once the node passes again (other drains stay).
exec /opt/cluster-validator/bin/validator node-check --mode slurm-healthcheck --drain --resume \
    --profile /etc/cluster-validator/profile.yaml \
    --prom-file /var/lib/node_exporter/textfile_collector/cluster_validator_healthcheck.prom \
    2>>/var/log/cluster-validator-healthcheck.log
