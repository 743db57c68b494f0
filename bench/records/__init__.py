"""Run records, the only contract between running and analysing: results, run files, journals, summaries."""

from bench.records._acceptance import (
    COUNTER_KEYS,
    acceptance_summary,
    counter_acceptance,
    counter_deltas,
)
from bench.records._identity import (
    COMPARED_AS_ERROR,
    COMPARED_AS_WARNING,
    SELECTION_KEYS,
    Mismatch,
    RunIdentity,
)
from bench.records._journal import Journal, read_journal
from bench.records._layout import (
    BASELINE,
    SPECULATIVE,
    comparison_files,
    default_run_file,
    has_journal,
    is_sweep_folder,
    journal_path,
    latest_comparison_folder,
    level_folder,
    lock_path,
    new_results_folder,
    plots_folder,
    run_file,
    sweep_cell_file,
    sweep_cells,
    sweep_files,
)
from bench.records._lock import open_no_follow, output_lock, write_text_file
from bench.records._merge import SHARD_KEY, ShardMarker, merge_shards, shard_marker
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
    "BASELINE",
    "COMPARED_AS_ERROR",
    "COMPARED_AS_WARNING",
    "COUNTER_KEYS",
    "MAX_LABEL_LENGTH",
    "SCHEMA_VERSION",
    "SELECTION_KEYS",
    "SHARD_KEY",
    "SPECULATIVE",
    "Acceptance",
    "Journal",
    "Mismatch",
    "Run",
    "RunIdentity",
    "RunMeta",
    "RunSettings",
    "SampleResult",
    "ServerDescription",
    "ShardMarker",
    "acceptance_summary",
    "collector_paused",
    "comparison_files",
    "counter_acceptance",
    "counter_deltas",
    "decode_margins",
    "default_run_file",
    "dumps_run",
    "encode_margins",
    "file_label",
    "finite",
    "has_journal",
    "is_sweep_folder",
    "journal_path",
    "latest_by_key",
    "latest_comparison_folder",
    "level_folder",
    "load_comparison_folder",
    "load_run",
    "lock_path",
    "merge_shards",
    "new_results_folder",
    "open_no_follow",
    "output_lock",
    "plots_folder",
    "read_journal",
    "result_from_dict",
    "run_file",
    "run_from_dict",
    "save_run",
    "shard_marker",
    "summarize",
    "summarize_group",
    "sweep_cell_file",
    "sweep_cells",
    "sweep_files",
    "write_text_file",
]
