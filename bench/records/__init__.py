"""Run records, the only contract between running and analysing: results, run files, journals, summaries."""

from bench.records._acceptance import (
    COUNTER_KEYS,
    acceptance_summary,
    counter_acceptance,
    counter_deltas,
)
from bench.records._journal import Journal, journal_path, read_journal
from bench.records._lock import lock_path, output_lock
from bench.records._merge import SHARD_KEY, ShardMarker, merge_shards, shard_marker
from bench.records._meta import Acceptance, RunMeta, RunSettings, ServerDescription
from bench.records._results import SampleResult, decode_margins, encode_margins, latest_by_key, result_from_dict
from bench.records._run import (
    Run,
    collector_paused,
    dumps_run,
    load_comparison_folder,
    load_run,
    run_from_dict,
    save_run,
)
from bench.records._schema import SCHEMA_VERSION, finite
from bench.records._summary import summarize, summarize_group

__all__ = [
    "COUNTER_KEYS",
    "SCHEMA_VERSION",
    "SHARD_KEY",
    "Acceptance",
    "Journal",
    "Run",
    "RunMeta",
    "RunSettings",
    "SampleResult",
    "ServerDescription",
    "ShardMarker",
    "acceptance_summary",
    "collector_paused",
    "counter_acceptance",
    "counter_deltas",
    "decode_margins",
    "dumps_run",
    "encode_margins",
    "finite",
    "journal_path",
    "latest_by_key",
    "load_comparison_folder",
    "load_run",
    "lock_path",
    "merge_shards",
    "output_lock",
    "read_journal",
    "result_from_dict",
    "run_from_dict",
    "save_run",
    "shard_marker",
    "summarize",
    "summarize_group",
]
