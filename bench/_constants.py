"""Constants shared across stages: the overall row's name, statistical defaults and exit codes."""

from __future__ import annotations

OVERALL = "overall"
"""Name of the row that pools every category."""

DEFAULT_THRESHOLD = 0.02
"""Smallest relative change a verdict counts (2%), for compare, report and bench."""

DEFAULT_GATE_THRESHOLD = 0.05
"""Smallest relative change the CI gate (`regress`) calls a regression (5%)."""

MIN_SAMPLES_FOR_CI = 5
"""Below this many paired samples no interval and no verdict are given."""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
