"""cluster-validator: pre-launch checks and post-mortems for distributed training jobs."""

__version__ = "0.1.0"
