"""The ``\\boxed{}`` verifier of src/tasks/boxed.ts and src/tasks/dataset.ts, string for string.

Self-contained (no import from the package), so verl can load it by file path:
``custom_reward_function.path=<this file>``, ``custom_reward_function.name=compute_score``.

JavaScript and Python disagree on what ``\\s``, ``\\d`` and ``trim()`` match (Python's ``\\s`` takes U+001C-U+001F
and U+0085 and leaves U+FEFF; its ``\\d`` takes every Unicode digit), so the classes are spelled out as
ECMAScript defines them; python/tests/test_boxed.py checks the rewards equal the TypeScript ones on the task
generators' answers and on adversarial strings.
"""

import re

# ECMAScript's WhiteSpace and LineTerminator: what JavaScript's \s and String.prototype.trim() match.
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_BOXED = re.compile(r"\\boxed[" + _JS_SPACE + r"]*\{")
_SPACES = re.compile("[" + _JS_SPACE + "]+")
_NUMBER = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?$")
_TRIM = re.compile("^[" + _JS_SPACE + "]+|[" + _JS_SPACE + "]+$")


def extract_boxed(text):
    """The contents of the last ``\\boxed{...}``, nested braces balanced; None when absent or the last is unclosed."""
    start = -1
    for m in _BOXED.finditer(text):
        start = m.end()
    if start < 0:
        return None
    depth = 1
    for i in range(start, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
    return None


def normalize_number(s):
    """A canonical string for a plain decimal number (whitespace, ``$..$``, ``+``, leading zeros, commas,
    trailing fractional zeros dropped; ``-0`` is ``0``), or None when ``s`` is not one."""
    t = _SPACES.sub("", s).replace(",", "")
    # JavaScript's length counts UTF-16 units; for "$...$" only "at least two characters" matters, the same here.
    if t.startswith("$") and t.endswith("$") and len(t) >= 2:
        t = t[1:-1]
    m = _NUMBER.match(t)
    # Python's $ also matches before a final newline; JavaScript's does not (the newline was stripped above anyway).
    if not m or m.end() != len(t):
        return None
    sign, int_part, frac_part = m.group(1), m.group(2) or "", m.group(3) or ""
    if int_part == "" and frac_part == "":
        return None
    whole = int_part.lstrip("0") or "0"
    frac = frac_part.rstrip("0")
    body = whole + "." + frac if frac else whole
    return "-" + body if sign == "-" and body != "0" else body


def verify_boxed_number(completion, answer):
    """1 if the last boxed answer is the number ``answer`` (both normalised), else 0 (the arithmetic tasks)."""
    got = extract_boxed(completion)
    if got is None:
        return 0
    n = normalize_number(got)
    return 1 if n is not None and n == normalize_number(answer) else 0


def verify_boxed(completion, answer):
    """1 if the last boxed answer is ``answer``: numbers compared normalised, other answers as text with runs of
    whitespace squashed (a dataset's rows)."""
    got = extract_boxed(completion)
    if got is None:
        return 0
    a, b = normalize_number(got), normalize_number(answer)
    if a is not None and b is not None:
        return 1 if a == b else 0

    def squash(s):
        return _TRIM.sub("", _SPACES.sub(" ", s))

    return 1 if squash(got) == squash(answer) else 0


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """verl's ``custom_reward_function`` signature: the reward of ``solution_str`` against ``ground_truth``, 0.0 or 1.0.

    ``data_source`` and ``extra_info`` are not read: the same verifier serves every data source. A numeric
    ground truth (a parquet column of numbers) is compared as its decimal string.
    """
    del data_source, extra_info, kwargs
    answer = ground_truth if isinstance(ground_truth, str) else _number_text(ground_truth)
    return float(verify_boxed(solution_str, answer))


def _number_text(x):
    # JavaScript's String(3.0) is "3"; Python's str(3.0) is "3.0". Both normalise to "3", but text answers do not.
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)
