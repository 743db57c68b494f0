"""Run records, the only contract between running and analysing: results, run files, journals, summaries."""

from bench.records._acceptance import (
    COUNTER_KEYS,
    acceptance_summary,
    counter_acceptance,
    counter_deltas,
)
from bench.records._journal import Journal, journal_path, read_journal
from bench.records._lock import lock_path, open_no_follow, output_lock
from bench.records._meta import Acceptance, RunMeta, RunSettings, ServerDescription
from bench.records._names import MAX_LABEL_LENGTH, file_label
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
    "MAX_LABEL_LENGTH",
    "SCHEMA_VERSION",
    "Acceptance",
    "Journal",
    "Run",
    "RunMeta",
    "RunSettings",
    "SampleResult",
    "ServerDescription",
    "acceptance_summary",
    "collector_paused",
    "counter_acceptance",
    "counter_deltas",
    "decode_margins",
    "dumps_run",
    "encode_margins",
    "file_label",
    "finite",
    "journal_path",
    "latest_by_key",
    "load_comparison_folder",
    "load_run",
    "lock_path",
    "open_no_follow",
    "output_lock",
    "read_journal",
    "result_from_dict",
    "run_from_dict",
    "save_run",
    "summarize",
    "summarize_group",
]
