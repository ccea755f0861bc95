"""Reading measurement CSVs: documented columns, unknown ones ignored, a clear reason per bad
row."""

from __future__ import annotations

import pytest

from infercast.errors import DataError
from infercast.validate.cases import load_cases, read_cases

HEADER = (
    "id,scenario,metric,value,model,hardware,weights,tp,input_tokens,output_tokens,batch,extra,"
    "my_note\n"
)


def test_good_row_parsed_and_unknown_column_ignored():
    (case,) = read_cases(
        HEADER
        + 'r1,kernel,decode_step_s,0.01,llama-3.1-8b,h100-sxm,BF16,1,512,32,8,"{""a"": 1}",hello\n'
    )
    assert case.problem is None
    assert (case.value, case.tp, case.batch, case.weights, case.extra) == (
        0.01,
        1,
        8,
        "bf16",
        {"a": 1},
    )


@pytest.mark.parametrize(
    ("cells", "reason"),
    [
        ("r,kernel,decode_step_s,fast,,,,,,,,,", "value='fast' is not a number"),
        ("r,kernel,decode_step_s,-1,,,,,,,,,", "must be a positive finite number"),
        ("r,kernel,decode_step_s,0.1,,,,two,,,,,", "tp='two' is not a number"),
        ("r,kernel,decode_step_s,0.1,,,,1.5,,,,,", "tp='1.5' is not a positive integer"),
        ("r,kernel,decode_step_s,0.1,,,,,,,,{oops,", "extra is not valid JSON"),
        (",kernel,decode_step_s,0.1,,,,,,,,,", "required column 'id' is empty"),
        ("r,kernel,decode_step_s,0.1,,,,,,,,,,,extra-cell", "more cells than header columns"),
    ],
)
def test_malformed_row_has_a_per_row_reason(cells, reason):
    (case,) = read_cases(HEADER + cells + "\n")
    assert case.problem is not None and reason in case.problem
    assert case.problem.startswith("line 2:")


def test_duplicate_id_is_reported_not_dropped():
    cases = read_cases(
        HEADER + "a,kernel,decode_step_s,0.1,,,,,,,,,\na,kernel,decode_step_s,0.2,,,,,,,,,\n"
    )
    assert len(cases) == 2 and cases[0].problem is None and "duplicate id 'a'" in cases[1].problem


def test_missing_required_column_is_a_file_error(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("id,metric,value\nx,ttft_mean_s,1\n")
    with pytest.raises(DataError, match="missing column"):
        load_cases(p)
    with pytest.raises(DataError, match="cannot read"):
        load_cases(tmp_path / "absent.csv")


def test_shipped_set_parses_cleanly():
    cases = load_cases()
    assert len(cases) == 3664 and not [c for c in cases if c.problem]
