"""Dates in the files openbench reads: ``YYYY-MM-DD``, ``YYYY-MM`` or ``YYYY``, one form per file.

A month or a year stands for its first day wherever dates are compared (a split's cut-off, a
ground-truth row against the graph's cut-off): a period that begins on or before a cut-off is not
after it. :func:`parse_dates` reads a file's column of dates, naming the file and line of the first
date in no form, in another form than the file's first date, or not in the calendar.
"""
from __future__ import annotations

import datetime
import re
from typing import Optional, Tuple

import polars as pl

from openbench._io.inputs import line_of_row
from openbench.errors import InputError, UsageError

__all__ = ["DATE_FORMS", "parse_date", "parse_dates"]

# a date's form: its pattern and strptime format
DATE_FORMS = {"day": (r"^\d{4}-\d{2}-\d{2}$", "%Y-%m-%d"), "month": (r"^\d{4}-\d{2}$", "%Y-%m"),
              "year": (r"^\d{4}$", "%Y")}


def _form(text: str) -> Optional[str]:
    return next((name for name, (pattern, _) in DATE_FORMS.items() if re.match(pattern, text)), None)


def parse_date(text: str, what: str = "--cutoff") -> datetime.date:
    """A cut-off: a day, ``YYYY-MM-DD``. A year or a month is refused: whether ``2019`` ends or
    begins the training is the reader's guess (2019-12-31 trains on 2019, 2018-12-31 tests on it)."""
    shown = str(text).strip()
    form = _form(shown)
    if form in ("year", "month"):
        raise UsageError(f"{what} {text!r} is a {form}; expected a day, YYYY-MM-DD (say {shown[:4]}-12-31 to train on "
                         f"{shown} or {int(shown[:4]) - 1}-12-31 to test on it)")
    try:
        if form is None:
            raise ValueError
        return datetime.datetime.strptime(shown, DATE_FORMS[form][1]).date()
    except ValueError:
        raise UsageError(f"{what} {text!r}: expected a date, YYYY-MM-DD") from None


def parse_dates(column: pl.Series, path, first_line: int) -> Tuple[pl.Series, Optional[str]]:
    """(the dates as a Date column, null where empty; their one form) of a file's date strings;
    a date in no form, or in another form than the first, is an error naming its line."""
    text = column.cast(pl.String).str.strip_chars()
    given = (text.is_not_null() & (text != "")).fill_null(False)
    forms = {name: text.str.contains(pattern).fill_null(False) for name, (pattern, _) in DATE_FORMS.items()}
    matched = forms["day"] | forms["month"] | forms["year"]
    bad = (given & ~matched).arg_true()

    def line(row: int) -> int:
        return line_of_row(path, row, (), first_line - 1)

    if len(bad):
        row = int(bad[0])
        raise InputError(f"date {text[row]!r}; expected YYYY-MM-DD (or YYYY-MM, YYYY)", path, line(row))
    dated = given.arg_true()
    if not len(dated):
        return pl.Series("date", [None] * len(text), dtype=pl.Date), None
    first = int(dated[0])
    form = next(name for name, mask in forms.items() if mask[first])
    other = (given & ~forms[form]).arg_true()
    if len(other):
        row = int(other[0])
        raise InputError(f"date {text[row]!r} is written in another form than the first date of the file "
                         f"({text[first]!r}, line {line(first)}); expected one form in a file", path, line(row))
    parsed = text.str.to_date(DATE_FORMS[form][1], strict=False)
    invalid = (given & parsed.is_null()).arg_true()  # a 13th month, a 30th of February
    if len(invalid):
        row = int(invalid[0])
        raise InputError(f"date {text[row]!r} is no day of the calendar", path, line(row))
    return parsed.alias("date"), form
