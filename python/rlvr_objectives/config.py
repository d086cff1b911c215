"""Each objective's options and defaults, as src/objectives/*.ts state them, and a parser that names a bad field.

Keys are the TypeScript ones (camelCase); snake_case spellings (``epsilon_high``) and the TRL / verl aliases the
TypeScript parsers accept (``clip_ratio_low``, ``loss_agg_mode``, ``num_generations``, ...) are accepted too. An
unknown key is an error: a typo must not fall back to a default silently.
"""

import math


class ConfigError(ValueError):
    """A bad option: ``objective``, ``field`` (as the caller spelled it), ``value`` and why."""

    def __init__(self, objective, field, value, reason):
        super().__init__("%s: %s = %r %s" % (objective, field, value, reason))
        self.objective, self.field, self.value, self.reason = objective, field, value, reason


class BatchError(ValueError):
    """A batch that cannot be computed with (src/objectives/errors.ts): ``field`` (``logProbs``, ``rewards``, ...),
    why, ``index`` the flat index of the first bad entry where there is one, ``kind`` one of 'shape', 'non-finite',
    'value', 'missing'."""

    def __init__(self, field, reason, index=None, kind="value"):
        super().__init__("batch.%s%s: %s" % (field, "" if index is None else "[%d]" % index, reason))
        self.field, self.reason, self.index, self.kind = field, reason, index, kind


_ADVANTAGE = {"scaleRewards": "group", "stdMode": "population", "advantageEpsilon": 0.0, "numGenerations": None}
_CONTRAST = {"positiveThreshold": 0.5, "groupNormalizer": "all", "numGenerations": None}

_GRPO = dict(_ADVANTAGE, epsilon=0.2, epsilonHigh=0.2, beta=0.0, lossType="grpo", dualClip=None, delta=None,
             maxCompletionLength=None, dynamicSampling=False, overlong=None)

DEFAULTS = {
    "grpo": _GRPO,
    # DAPO: clip-higher, token-mean, dynamic sampling (grpo.ts DAPO_DEFAULTS).
    "dapo": dict(_GRPO, epsilonHigh=0.28, lossType="dapo", dynamicSampling=True),
    # Dr. GRPO: no std scaling, constant normaliser.
    "dr_grpo": dict(_GRPO, scaleRewards="none", lossType="dr_grpo"),
    "gspo": dict(_ADVANTAGE, epsilon=3e-4, epsilonHigh=4e-4, beta=0.0, lossType="grpo", maxCompletionLength=None),
    # epsilonHigh None: the upper clip is epsilon's (the paper's symmetric range).
    "gmpo": dict(_ADVANTAGE, epsilon=0.4, epsilonHigh=None, beta=0.0),
    "cispo": dict(_ADVANTAGE, epsilonMax=5.0, epsilonLow=None, beta=0.0, lossType="dapo", maxCompletionLength=None),
    "sapo": dict(_ADVANTAGE, temperaturePos=1.0, temperatureNeg=1.05, beta=0.0, lossType="grpo",
                 maxCompletionLength=None),
    "disco": dict(_CONTRAST, score="log-l", variant="disco", tau=10.0, beta=1e3, delta=1e-4, klEstimator="k1",
                  negativeAggregate="logsumexp"),
    # ConSPO's paper defaults: tau 10, M 0.01, alpha 0.3, cosine margin (Eq. 16), InfoNCE (Eq. 15).
    "conspo": dict(_CONTRAST, tau=10.0, margin=0.01, alpha=0.3, marginSchedule="cosine", contrast="infonce",
                   score="log-likelihood", epsilon=0.2, epsilonHigh=0.2, beta=0.0),
}

LOSS_TYPE_ALIASES = {"grpo": "grpo", "seq-mean-token-mean": "grpo", "dapo": "dapo", "token-mean": "dapo",
                     "dr_grpo": "dr_grpo", "seq-mean-token-sum-norm": "dr_grpo", "bnpo": "bnpo"}


def _num(pred, why):
    def check(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not pred(v):
            return None, why
        return float(v), None
    return check


def _int(pred, why):
    def check(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or not pred(v):
            return None, why
        return int(v), None
    return check


def _one_of(values, aliases=None):
    table = dict((v, v) for v in values)
    table.update(aliases or {})

    def check(v):
        if v in table:
            return table[v], None
        return None, "must be one of %s" % ", ".join(values)
    return check


def _nullable(check):
    return lambda v: (None, None) if v is None else check(v)


def _bool(v):
    return (v, None) if isinstance(v, bool) else (None, "must be true or false")


def _scale(v):
    # TRL's legacy booleans, verl's norm_adv_by_std_in_grpo: true is 'group', false 'none'.
    if v is True:
        return "group", None
    if v is False:
        return "none", None
    return _one_of(["group", "batch", "none"])(v)


def _overlong(v):
    if v is None:
        return None, None
    if not isinstance(v, dict) or not any(k in v for k in ("maxLength", "max_length", "max_completion_len")):
        return None, "needs maxLength"
    names = {"maxLength": "maxLength", "max_length": "maxLength", "max_completion_len": "maxLength",
             "cacheLength": "cacheLength", "cache_length": "cacheLength", "soft_punish_cache": "cacheLength",
             "len": "cacheLength", "penaltyFactor": "penaltyFactor", "penalty_factor": "penaltyFactor"}
    out = {"maxLength": 1, "cacheLength": 0, "penaltyFactor": 1}
    for k, x in v.items():
        if k not in names:
            return None, "has an unknown key %s" % k
        out[names[k]] = x
    if out["cacheLength"] >= out["maxLength"]:
        return None, "cacheLength must be < maxLength"
    return out, None


_positive = _num(lambda x: x > 0, "must be > 0")
_non_negative = _num(lambda x: x >= 0, "must be >= 0")
_open_unit = _num(lambda x: 0 < x < 1, "must be in (0, 1)")
_above_one = _num(lambda x: x > 1, "must be > 1")
_finite = _num(lambda x: True, "must be a finite number")
_positive_int = _int(lambda x: x > 0, "must be a positive integer")
_group_size = _int(lambda x: x >= 2, "must be an integer >= 2 (a group needs at least two rollouts)")
_loss_type = _one_of(["grpo", "dapo", "dr_grpo", "bnpo"], LOSS_TYPE_ALIASES)

_ADVANTAGE_SPEC = {"scaleRewards": _scale,
                   "stdMode": _one_of(["population", "bessel"], {"unbiased": "bessel", "biased": "population"}),
                   "advantageEpsilon": _non_negative, "numGenerations": _nullable(_group_size)}
_CONTRAST_SPEC = {"positiveThreshold": _finite, "groupNormalizer": _one_of(["all", "valid"]),
                  "numGenerations": _nullable(_group_size)}
_TOKEN = {"beta": _non_negative, "lossType": _loss_type, "maxCompletionLength": _nullable(_positive_int)}

SPECS = {
    "grpo": dict(_ADVANTAGE_SPEC, **_TOKEN, epsilon=_open_unit, epsilonHigh=_positive, dualClip=_nullable(_above_one),
                 delta=_nullable(_above_one), dynamicSampling=_bool, overlong=_overlong),
    "gspo": dict(_ADVANTAGE_SPEC, **_TOKEN, epsilon=_open_unit, epsilonHigh=_positive),
    "gmpo": dict(_ADVANTAGE_SPEC, epsilon=_open_unit, epsilonHigh=_nullable(_positive), beta=_non_negative),
    "cispo": dict(_ADVANTAGE_SPEC, **_TOKEN, epsilonMax=_num(lambda x: x >= 1, "must be >= 1 (an absolute cap on the "
                                                           "IS weight)"), epsilonLow=_nullable(_open_unit)),
    "sapo": dict(_ADVANTAGE_SPEC, **_TOKEN, temperaturePos=_positive, temperatureNeg=_positive),
    "disco": dict(_CONTRAST_SPEC, score=_one_of(["log-l", "l-ratio"], {"logL": "log-l", "Lratio": "l-ratio"}),
                  variant=_one_of(["disco", "disco-b"]), tau=_positive, beta=_non_negative, delta=_non_negative,
                  klEstimator=_one_of(["k1", "k3"], {"kl": "k1", "low_var_kl": "k3"}),
                  negativeAggregate=_one_of(["logsumexp", "logmeanexp"])),
    "conspo": dict(_CONTRAST_SPEC, tau=_positive, margin=_non_negative,
                   alpha=_num(lambda x: 0 < x <= 1, "must be in (0, 1]"),
                   marginSchedule=_one_of(["cosine", "fixed", "none"]), contrast=_one_of(["infonce", "linear"]),
                   score=_one_of(["log-likelihood", "clipped-ratio"]), epsilon=_open_unit, epsilonHigh=_positive,
                   beta=_non_negative),
}
SPECS["dapo"] = SPECS["dr_grpo"] = SPECS["grpo"]

_COMMON_ALIASES = {"num_generations": "numGenerations", "G": "numGenerations",
                   "norm_adv_by_std_in_grpo": "scaleRewards", "loss_agg_mode": "lossType"}
ALIASES = {
    "grpo": {"epsilon_low": "epsilon", "clip_ratio_low": "epsilon", "clip_ratio_high": "epsilonHigh",
             "clip_ratio_c": "dualClip"},
    "gspo": {"epsilon_low": "epsilon"},
    "gmpo": {},
    "cispo": {"epsilon_high": "epsilonMax", "epsilonHigh": "epsilonMax", "epsilon_max": "epsilonMax",
              "epsilon_low": "epsilonLow"},
    "sapo": {"sapo_temperature_pos": "temperaturePos", "sapo_temperature_neg": "temperatureNeg",
             "tau_pos": "temperaturePos", "tau_neg": "temperatureNeg"},
    "disco": {"score_func": "score", "kl_type": "klEstimator"},
    "conspo": {"M": "margin", "target_margin": "margin", "warmup_ratio": "alpha"},
}
ALIASES["dapo"] = ALIASES["dr_grpo"] = ALIASES["grpo"]


def _camel(key):
    head, *rest = key.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def option_name(objective, key):
    """The canonical name (camelCase, as the TypeScript record's) of option ``key`` of ``objective``, or None."""
    spec, aliases = SPECS[objective], dict(_COMMON_ALIASES, **ALIASES[objective])
    name = aliases.get(key, key)
    if name not in spec:
        name = _camel(name)
    return name if name in spec else None


def parse_config(objective, options=None):
    """The full config record of ``objective``: its defaults with ``options`` applied and checked.

    As the TypeScript parsers: GRPO's and Dr. GRPO's ``epsilonHigh`` follows ``epsilon`` when only ``epsilon`` is
    given (TRL), as ConSPO's does; DAPO's keeps 0.28. Raises ``ConfigError`` naming the field.
    """
    if objective not in DEFAULTS:
        raise ConfigError("registry", "objective", objective, "must be one of %s" % ", ".join(DEFAULTS))
    spec = SPECS[objective]
    out = dict(DEFAULTS[objective])
    given = set()
    for key, value in (options or {}).items():
        name = option_name(objective, key)
        if name is None:
            raise ConfigError(objective, key, value, "is not an option of %s" % objective)
        if value is None and DEFAULTS[objective][name] is not None:
            continue  # None means "the default", as undefined does in TypeScript.
        parsed, why = spec[name](value)
        if why is not None:
            raise ConfigError(objective, key, value, why)
        out[name] = parsed
        given.add(name)
    follows = objective in ("grpo", "dr_grpo", "conspo")
    if follows and "epsilon" in given and "epsilonHigh" not in given:
        out["epsilonHigh"] = out["epsilon"]
    return out
