"""Unit helpers. Inside infercast everything is SI: seconds, bytes, FLOP/s, bytes/s.

GB is 1e9 bytes and GiB is 2**30 bytes; every output says which. Convert only
at the edges (CLI flags, tables, JSON meant for people).
"""

from __future__ import annotations

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40

MS = 1e-3
US = 1e-6


def fmt_bytes(num_bytes: float) -> str:
    """'92.31 GB (85.97 GiB)': both decimal and binary, so nobody mixes them up."""
    return f"{num_bytes / GB:,.2f} GB ({num_bytes / GiB:,.2f} GiB)"


def fmt_time(seconds: float) -> str:
    """A human time with a unit chosen for its size (us, ms or s)."""
    if seconds != seconds:  # NaN
        return "n/a"
    if abs(seconds) < 1e-3:
        return f"{seconds / US:,.1f} us"
    if abs(seconds) < 1.0:
        return f"{seconds / MS:,.2f} ms"
    return f"{seconds:,.3f} s"


def fmt_si(value: float, unit: str) -> str:
    """Scale a value with SI prefixes: fmt_si(3.35e12, 'B/s') -> '3.35 TB/s'."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:,.2f} {prefix}{unit}"
    return f"{value:,.2f} {unit}"
