"""validation.py: the type checks name the field, what was expected, what came, and the fix."""

import pytest

from infercast.errors import ConfigError
from infercast.validation import check_bool, check_mapping, check_str


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        (check_str, 3, "`x` = 3: expected a string, got int; give a non-empty string"),
        (check_bool, 1, "`x` = 1: expected true or false, got int; write true or false"),
        (check_mapping, [1], "expected an object of fields, got list; write a JSON object"),
    ],
)
def test_a_value_of_the_wrong_type_is_an_error_naming_both_types(check, value, message):
    with pytest.raises(ConfigError) as err:
        check(value, "`x`")
    assert message in str(err.value)


def test_a_value_of_the_right_type_comes_back_unchanged():
    table = {"a": 1}
    assert check_str("s", "`x`") == "s" and check_bool(False, "`x`") is False
    assert check_mapping(table, "`x`") is table
    with pytest.raises(ConfigError, match="empty"):
        check_str("  ", "`x`")
