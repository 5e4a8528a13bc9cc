"""The command line's value types (zerolock_core/config/arg_types.py), shared by `zerolock train` and `zerolock bench`."""
from __future__ import annotations

import argparse

import pytest

from zerolock_core.config.arg_types import bytes_arg, floats_arg, ints_arg


@pytest.mark.parametrize("text,expected", [
    ("512MiB", 512 * 2**20), ("32 mib", 32 * 2**20), ("2e8", 200_000_000), ("1GB", 10**9), ("4096", 4096),
    ("1.5KiB", 1536),
])
def test_a_size_is_read_in_bytes(text, expected):
    assert bytes_arg(text) == expected


@pytest.mark.parametrize("parse,text,expected", [
    (ints_arg, "20,25", (20, 25)), (ints_arg, "3,", (3,)), (floats_arg, "1,0.5,0.5", (1.0, 0.5, 0.5)),
])
def test_a_list_is_read_as_a_tuple(parse, text, expected):
    assert parse(text) == expected


@pytest.mark.parametrize("parse,text,message", [
    (bytes_arg, "3XB", "expected a size like 512MiB"), (bytes_arg, "MiB", "expected a size"),
    (ints_arg, "2.5", "comma-separated integers"), (ints_arg, ",", "at least one integer"),
    (floats_arg, "a,b", "comma-separated numbers"),
])
def test_a_bad_value_is_an_argument_error_that_says_what_is_expected(parse, text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse(text)
