"""cluster-validator: pre-launch checks and post-mortems for distributed training jobs."""

__version__ = "0.1.0"
FACTS_SCHEMA = 1  # the facts document's version (validator.model re-exports both)
REPORT_SCHEMA = 1  # the JSON report's
