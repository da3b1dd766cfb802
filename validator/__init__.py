"""cluster-validator: pre-launch checks and post-mortems for distributed training jobs."""

__version__ = "0.1.0"
FACTS_SCHEMA = 1  # the facts document's version (validator.model re-exports both)
REPORT_SCHEMA = 1  # the JSON report's
MAX_RANKS = 1 << 20  # 1,048,576 ranks: larger sizes and ranges from input are refused (validator.targets)
