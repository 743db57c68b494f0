"""Run files' bytes: the C-speed encoder writes exactly what `json.dumps(indent=2, sort_keys=True)` writes."""

from __future__ import annotations

import json
import math
from pathlib import Path

from hypothesis import given, settings, strategies as st

from bench.prompts import PromptSet, Sample
from bench.records import dumps_run, load_run, python_reference_json, reference_json, save_run
from bench.runner import RunConfig, run_benchmark

DATA = Path(__file__).parent / "data"


def _python(payload: object) -> bytes:
    return json.dumps(payload, indent=2, sort_keys=True, allow_nan=False).encode("ascii")


def test_every_json_fixture_is_written_byte_for_byte_as_pythons_encoder_writes_it() -> None:
    fixtures = sorted(DATA.rglob("*.json"))
    assert len(fixtures) >= 6
    for path in fixtures:
        payload = json.loads(path.read_text(encoding="utf-8"))
        assert reference_json(payload) == _python(payload), path.name


def test_the_reference_run_files_save_to_the_bytes_pythons_encoder_gives(tmp_path: Path) -> None:
    for name in ("reference_baseline.json", "reference_speculative.json"):
        run = load_run(DATA / name)
        save_run(run, tmp_path / name)
        assert (tmp_path / name).read_bytes() == _python(run.to_dict()) == dumps_run(run).encode("ascii")


def test_floats_are_spelled_as_repr_spells_them() -> None:
    values = [1e-05, 2.5e-07, 1e16, 1e22, 1.5e300, 5e-324, 0.0001, 0.00012, -3e-05, -0.0, 123456789012345678.0,
              1e15, 9999999999999998.0, 0.1, 100.0, 12345.678, -1e-100]
    assert reference_json(values) == _python(values)
    nested = {"a": 1e-05, "b": [1e16, {"c": -2e-09}]}
    assert reference_json(nested) == _python(nested)


def test_text_that_looks_like_a_float_is_left_as_text() -> None:
    payload = {"1e5": "x 1e5", "k": ["0.00001", "v\": 1e16"], "e": "é 1e-05", "n": 1e-05}
    assert reference_json(payload) == _python(payload)


def test_non_ascii_del_and_controls_are_escaped_as_python_escapes_them() -> None:
    payload = {"text": "¿Qué? 日本語 😀 \x7f \x00 \t \u2028 \"q\" \\", "ключ": ["Ωμέγα", "\U0010ffff"]}
    assert reference_json(payload) == _python(payload)


def test_nan_and_infinities_are_null_and_what_msgspec_refuses_takes_pythons_path() -> None:
    assert reference_json({"a": math.nan, "b": [math.inf, -math.inf]}) == _python({"a": None, "b": [None, None]})
    huge = {"big": 2**70, "lone": "\ud800"}
    assert reference_json(huge) == _python(huge) == python_reference_json(huge)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_any_json_value_gives_pythons_bytes(payload: object) -> None:
    assert reference_json(payload) == _python(payload)


def test_a_run_with_non_ascii_prompts_and_labels_is_saved_as_pythons_encoder_writes_it(
    fake_server, tmp_path: Path
) -> None:
    samples = (Sample(id="qué-001", category="código", turns=("¿Cómo estás? 日本語で答えて 😀",)),
               Sample(id="ω-002", category="математика", turns=("Σ x² ≈ 1e-05?", "и потом?")))
    prompts = PromptSet(samples=samples, source="test", bench="qualitative", categories=("código", "математика"))
    config = RunConfig(url=fake_server.url, osl=8, label="étiquette ✓", tags={"modèle": "ŝmol"})
    run, _ = run_benchmark(prompts, config, output=tmp_path / "run.json", install_signal_handlers=False)
    written = (tmp_path / "run.json").read_bytes()
    assert written == _python(load_run(tmp_path / "run.json").to_dict()) == _python(run.to_dict())
    assert b"\\u00e9tiquette" in written and "é".encode() not in written
