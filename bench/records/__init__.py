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
from bench.records._lock import output_lock
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
    "BASELINE",
    "COMPARED_AS_ERROR",
    "COMPARED_AS_WARNING",
    "COUNTER_KEYS",
    "SCHEMA_VERSION",
    "SELECTION_KEYS",
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
    "acceptance_summary",
    "collector_paused",
    "comparison_files",
    "counter_acceptance",
    "counter_deltas",
    "decode_margins",
    "default_run_file",
    "dumps_run",
    "encode_margins",
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
    "new_results_folder",
    "output_lock",
    "plots_folder",
    "read_journal",
    "result_from_dict",
    "run_file",
    "run_from_dict",
    "save_run",
    "summarize",
    "summarize_group",
    "sweep_cell_file",
    "sweep_cells",
    "sweep_files",
]
