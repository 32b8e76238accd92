"""Link rates, times and loss percentages as the benchmarks spell them."""

import re

RATE_UNITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
TIME_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
_NUMBER = r"([0-9]*\.?[0-9]+)"


def parse_rate(text, what="link rate"):
    """'1gbit' -> 1e9 bits per second. ValueError naming `what` otherwise."""
    m = re.fullmatch(r"\s*" + _NUMBER + r"\s*([a-z]+)\s*", text or "")
    if not m or m.group(2) not in RATE_UNITS or float(m.group(1)) <= 0:
        raise ValueError(
            f"{what} must be a positive rate like 100mbit, 1gbit or 25gbit, got {text!r}")
    return float(m.group(1)) * RATE_UNITS[m.group(2)]


def parse_time(text, what="time"):
    """'100us' -> 1e-4 seconds (0 allowed). ValueError naming `what` otherwise."""
    m = re.fullmatch(r"\s*" + _NUMBER + r"\s*(us|ms|s)\s*", text or "")
    if not m:
        raise ValueError(f"{what} must be a time like 0us, 100us or 2ms, got {text!r}")
    return float(m.group(1)) * TIME_UNITS[m.group(2)]


def parse_loss(text, what="loss"):
    """'0.1' or '0.1%' -> 0.1 (percent, in [0, 100))."""
    m = re.fullmatch(r"\s*" + _NUMBER + r"\s*%?\s*", text or "")
    if not m or not 0 <= float(m.group(1)) < 100:
        raise ValueError(f"{what} must be a percentage in [0, 100), got {text!r}")
    return float(m.group(1))


def rate_sort_key(link):
    """Orders link names by rate; names that are no rate (e.g. "loopback") first."""
    try:
        return parse_rate(link)
    except ValueError:
        return 0.0
