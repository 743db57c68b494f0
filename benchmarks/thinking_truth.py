"""Tokens per verification step inside thinking and inside the answer, read from stream bursts, against a server of
known truth (tests/fake_thinking.py): the error of the estimate speedbench prints in its thinking table.

Run: .venv/bin/python benchmarks/thinking_truth.py [--limit 4] [--thinking 200] [--answer 60]
For each truth (mean tokens per step in the thinking and in the answer, a step time, a concurrency), one streamed
`speedbench run` over the qualitative prompts against the fake server; the estimate (`tokens_per_step`) is compared
with the tokens and steps the server recorded. Prints one line per truth and the largest relative error; exits 1
when it exceeds 5%.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.analysis import tokens_per_step  # noqa: E402
from bench.cli import main  # noqa: E402
from bench.records import load_run  # noqa: E402
from tests.fake_thinking import ThinkingServer, ThinkingTruth  # noqa: E402

TRUTHS = (  # (thinking tokens/step, answer tokens/step, step seconds, concurrency)
    (1.0, 1.0, 0.003, 1),
    (2.0, 1.5, 0.003, 1),
    (3.0, 1.5, 0.002, 1),
    (4.5, 2.0, 0.004, 1),
    (3.0, 1.5, 0.004, 4),
)
LIMIT_ERROR = 0.05


def measure(steps: tuple[float, float], step_s: float, concurrency: int, args: argparse.Namespace,
            folder: Path) -> tuple[dict[str, float | None], dict[str, float]]:
    """(estimated, true) tokens per step per segment for one truth."""
    truth = ThinkingTruth(thinking=args.thinking, answer=args.answer, steps={"t": steps[0], "a": steps[1]},
                          step_s=step_s)
    output = folder / f"run-{steps[0]}-{steps[1]}-{step_s}-{concurrency}.json"
    with ThinkingServer(truth) as server, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        code = main(["run", "--url", server.url, "--engine", "llamacpp", "--limit", str(args.limit), "--osl",
                     str(args.thinking + args.answer), "--stream", "--quiet", "--concurrency", str(concurrency),
                     "--output", str(output)])
    if code != 0:
        raise SystemExit(f"speedbench run exited {code}")
    run = load_run(output)
    answered = truth.done[-sum(result.turns for result in run.results):]
    true = {kind: sum(item[kind][0] for item in answered) / sum(item[kind][1] for item in answered)
            for kind in ("t", "a")}
    return tokens_per_step(run.results), true


def main_() -> int:
    """Measure every truth; print the errors; 1 when the largest is over 5%."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=4, help="samples per category (default 4)")
    parser.add_argument("--thinking", type=int, default=200, help="thinking tokens a turn (default 200)")
    parser.add_argument("--answer", type=int, default=60, help="answer tokens a turn (default 60)")
    args = parser.parse_args()
    worst = 0.0
    print("truth t/step (think, answer)  step_ms  conc  estimated (think, answer)  error (think, answer)")
    with tempfile.TemporaryDirectory() as folder:
        for think, answer, step_s, concurrency in TRUTHS:
            got, true = measure((think, answer), step_s, concurrency, args, Path(folder))
            errors = []
            for kind in ("t", "a"):
                value = got[kind]
                errors.append(abs(value / true[kind] - 1) if value is not None else float("inf"))
            worst = max(worst, *errors)
            print(f"{true['t']:>5.3f}, {true['a']:>5.3f}{'':15}  {step_s * 1e3:>7.1f}  {concurrency:>4}  "
                  f"{got['t'] or float('nan'):>6.3f}, {got['a'] or float('nan'):>6.3f}{'':12}  "
                  f"{errors[0]:>6.2%}, {errors[1]:>6.2%}")
    print(f"largest error {worst:.2%} (limit {LIMIT_ERROR:.0%})")
    return 0 if worst <= LIMIT_ERROR else 1


if __name__ == "__main__":
    sys.exit(main_())
