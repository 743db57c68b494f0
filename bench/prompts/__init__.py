"""Prompt sources: the shipped categories, the offline throughput generator, local files and the SPEED-Bench hub."""

from bench.prompts._load import DEFAULT_GENERATED_PER_TIER, load_prompts
from bench.prompts._sets import (
    GROUNDED,
    HUB,
    HUB_BENCHES,
    HUB_DATASET,
    HUB_PROBE_TIMEOUT_S,
    HUB_REVISION,
    PLACEHOLDER_PREFIX,
    SHIPPED,
    SHIPPED_BENCHES,
    SPEC_BENCH_CATEGORY_MAP,
    PromptSet,
    Sample,
    categories_dir,
    read_rows,
    rows_to_samples,
)
from bench.prompts._shard import Shard, shard_schedule
from bench.prompts._throughput import (
    MAX_COUNT_CALLS,
    THROUGHPUT_BENCHES,
    TIERS,
    build_throughput_prompts,
    estimate_tokens,
)

__all__ = [
    "DEFAULT_GENERATED_PER_TIER",
    "GROUNDED",
    "HUB",
    "HUB_BENCHES",
    "HUB_DATASET",
    "HUB_PROBE_TIMEOUT_S",
    "HUB_REVISION",
    "MAX_COUNT_CALLS",
    "PLACEHOLDER_PREFIX",
    "SHIPPED",
    "SHIPPED_BENCHES",
    "SPEC_BENCH_CATEGORY_MAP",
    "THROUGHPUT_BENCHES",
    "TIERS",
    "PromptSet",
    "Sample",
    "Shard",
    "build_throughput_prompts",
    "categories_dir",
    "estimate_tokens",
    "load_prompts",
    "read_rows",
    "rows_to_samples",
    "shard_schedule",
]
