"""Run records, the only contract between running and analysing: results, run files, journals, summaries."""

from bench.records._acceptance import (
    COUNTER_KEYS,
    acceptance_summary,
    counter_acceptance,
    counter_deltas,
)
from bench.records._journal import Journal, journal_path, read_journal
from bench.records._results import SampleResult, decode_margins, encode_margins, latest_by_key, result_from_dict
from bench.records._run import Run, dumps_run, load_run, run_from_dict, save_run
from bench.records._schema import SCHEMA_VERSION
from bench.records._summary import summarize, summarize_group

__all__ = [
    "COUNTER_KEYS",
    "SCHEMA_VERSION",
    "Journal",
    "Run",
    "SampleResult",
    "acceptance_summary",
    "counter_acceptance",
    "counter_deltas",
    "decode_margins",
    "dumps_run",
    "encode_margins",
    "journal_path",
    "latest_by_key",
    "load_run",
    "read_journal",
    "result_from_dict",
    "run_from_dict",
    "save_run",
    "summarize",
    "summarize_group",
]
