"""Shared by the golden tests: reading the files and the agreement measure."""

import json
import os

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")

# Agreement asked by the issue: 1e-6 relative. Values that are exactly 0 on one side (a metric that counts nothing,
# a padding gradient) are compared with an absolute floor of 1e-12, far below any value the objectives produce.
REL_TOL = 1e-6
ABS_FLOOR = 1e-12


def load(name):
    with open(os.path.join(GOLDEN, name), encoding="utf-8") as f:
        return json.load(f)


def rel_err(actual, expected):
    """|a - e| / max(|a|, |e|), and 0 when the difference is below the absolute floor."""
    diff = abs(actual - expected)
    if diff <= ABS_FLOOR:
        return 0.0
    return diff / max(abs(actual), abs(expected))
