"""The objectives and RCC for verl (written against verl b178a3cd56f58b2d502255daba591e92833930a7, v0.7.0-125).

Load it in every verl process with ``VERL_USE_EXTERNAL_MODULES=rlvr_objectives.verl_plugin`` (verl/__init__.py imports
the listed modules), or, on verl versions that load ``verl.plugins`` entry points, by installing the package (its
pyproject.toml declares one): importing it registers, when verl is importable, and does nothing otherwise,

* the policy losses ``rlvr_grpo``, ``rlvr_dapo``, ``rlvr_dr_grpo``, ``rlvr_gspo``, ``rlvr_gmpo``, ``rlvr_cispo``,
  ``rlvr_sapo``, ``rlvr_disco``, ``rlvr_conspo`` (``register_policy_loss``; chosen by
  ``actor_rollout_ref.actor.policy_loss.loss_mode``), each ``fn(old_log_prob, log_prob, advantages,
  response_mask, loss_agg_mode, config, rollout_is_weights) -> (loss, metrics)``;
* the advantage estimators (``register_adv_est``; chosen by ``algorithm.adv_estimator``) ``rlvr_group`` (the
  project's group-relative advantages with its scaling options, Eq. 1), ``rlvr_contrast`` (what ``rlvr_disco`` and
  ``rlvr_conspo`` read: each row's class, group and the margin of Eq. 16, see ``encode_contrast``) and ``rlvr_rcc``
  (RCC; it needs the rollout and reference log-probs, which verl does not hand an estimator: import
  ``rlvr_objectives.verl_rcc`` too, which passes them).

Options verl's actor config has are read from it (one place to set them): ``clip_ratio_low`` / ``clip_ratio_high``
(epsilon, epsilonHigh), ``clip_ratio_c`` (the dual clip of GRPO, DAPO and Dr. GRPO, as verl's ``vanilla`` applies it;
inf: none), ``loss_agg_mode`` (lossType), ``tau_pos`` / ``tau_neg`` (SAPO), ``loss_scale_factor`` (Dr. GRPO's
maxCompletionLength). The others come from the JSON in the environment variable ``RLVR_OBJECTIVE_CONFIG``
(``rlvr export-config --engine verl`` writes both): ``{"objective": ..., "options": {...}, "totalSteps": ...,
"rcc": {...}, "conventions": "rlvr" | "verl"}``; ``"verl"`` follows verl's built-in losses where they differ from the
project's by a convention (python/README.md, "verl's built-in losses"). The KL term (beta) is verl's own
``use_kl_loss`` with ``low_var_kl`` (the same k3 estimator), so these losses leave it out. A NaN or infinite input
is a ``BatchError`` naming the argument verl passed (``log_prob``, ``advantages``, ``token_level_rewards``, ...).

What verl imposes, and export-config sets: the contrastive losses need each group whole inside a micro-batch
(``trainer.balance_batch=False``, ``use_dynamic_bsz=False``, micro-batches a multiple of the group size); DisCO's
KL constraint is then taken per micro-batch, not over the whole batch.
"""

import json
import math
import os

import torch

from .advantages import (RCC_ADVANTAGES, apply_soft_overlong, dynamic_sampling_keep, group_advantages, group_layout,
                         rcc_advantages, sequence_deltas)
from .batch import renamed
from .config import BatchError, ConfigError, option_name, parse_config
from .losses import LOSSES, USES_ADVANTAGES, RolloutBatch, conspo_margin

ENV = "RLVR_OBJECTIVE_CONFIG"
LOSS_NAMES = {name: "rlvr_" + name for name in LOSSES}
# verl's loss_agg_mode names -> the project's loss types ("seq-mean-token-sum" has none: refused).
VERL_AGGREGATION = {"token-mean": "dapo", "seq-mean-token-mean": "grpo", "seq-mean-token-sum-norm": "dr_grpo"}
CONTRASTIVE = {"disco", "conspo"}
# The losses that take verl's dual clip (clip_ratio_c), as verl's vanilla does.
DUAL_CLIP = {"grpo", "dapo", "dr_grpo"}
# RLVR_OBJECTIVE_CONFIG's "conventions": the project's ('rlvr', default) or verl's built-in losses' ('verl').
CONVENTIONS = ("rlvr", "verl")
# A bad input is a BatchError naming the argument verl passed (batch.py's checks: finite values at response tokens).
INPUT_NAMES = {"logProbs": "log_prob", "oldLogProbs": "old_log_prob", "mask": "response_mask",
               "advantages": "advantages"}
# Margin resolution of the contrast code: 12 bits beside a group index below 2^11 stay exact in float32.
_MARGIN_STEPS = 2048
_MAX_GROUPS = 2048


def run_config(environ=None):
    """The JSON of ``RLVR_OBJECTIVE_CONFIG`` (empty when unset)."""
    text = (os.environ if environ is None else environ).get(ENV, "")
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ConfigError("verl", ENV, text, "is not JSON (%s)" % e)
    if not isinstance(value, dict):
        raise ConfigError("verl", ENV, text, "must be a JSON object")
    return value


def _get(config, key, default=None):
    if config is None:
        return default
    if isinstance(config, dict):
        return config.get(key, default)
    getter = getattr(config, "get", None)
    if getter is not None:
        return getter(key, default)
    return getattr(config, key, default)


def conventions(run):
    """The run's ``conventions``: 'rlvr' (default: the project's objectives, as the golden vectors state them) or
    'verl' (verl's built-in losses' conventions where the two differ by a convention; python/README.md)."""
    value = run.get("conventions", "rlvr")
    if value not in CONVENTIONS:
        raise ConfigError("verl", ENV + ".conventions", value, "must be one of %s" % ", ".join(CONVENTIONS))
    return value


def _clip_range(actor_config):
    """verl's clip_ratio_low / clip_ratio_high, each falling back to clip_ratio as verl's losses do (None: unset)."""
    clip = _get(actor_config, "clip_ratio")
    low, high = _get(actor_config, "clip_ratio_low"), _get(actor_config, "clip_ratio_high")
    low = clip if low is None else low
    high = clip if high is None else high
    return (None if low is None else float(low)), (None if high is None else float(high))


def _dual_clip(name, actor_config, options, cfg):
    """verl's ``clip_ratio_c`` as the dual clip of GRPO, DAPO and Dr. GRPO, as verl's ``vanilla`` loss applies it
    (3.0 in verl's defaults); ``inf`` turns it off (the project's default). When the run's options name dualClip too,
    the two must agree: a refusal names both rather than one silently winning."""
    c = _get(actor_config, "clip_ratio_c")
    if c is None:
        return  # a config without the key (not verl's ActorConfig): the run's options decide
    value = _host_float(c)
    if value is None or math.isnan(value) or value <= 1:
        raise ConfigError(name, "clip_ratio_c", c, "must be > 1 (verl's dual clip; inf turns it off)")
    verl_value = None if math.isinf(value) else value
    given = [k for k in options if option_name(name, k) == "dualClip"]
    if given and cfg["dualClip"] != verl_value:
        raise ConfigError(name, "clip_ratio_c", c, "disagrees with %s.options.%s = %r: set clip_ratio_c=%s, or drop "
                                                   "%s from the options to take verl's"
                          % (ENV, given[0], options[given[0]],
                             "inf" if cfg["dualClip"] is None else cfg["dualClip"], given[0]))
    cfg["dualClip"] = verl_value


def _host_float(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def objective_config(name, actor_config, loss_agg_mode, run=None):
    """The full config of objective ``name`` inside verl: the run's options, then verl's own keys over them (under
    ``conventions: 'verl'``, also the keys verl's built-in loss of that name reads)."""
    run = run_config() if run is None else run
    if run.get("objective") not in (None, name):
        raise ConfigError(name, ENV + ".objective", run.get("objective"),
                          "names another objective than loss_mode rlvr_%s" % name)
    verl_conventions = conventions(run) == "verl"
    options = dict(run.get("options") or {})
    # DisCO's beta is its constraint's weight (against pi_old), the loss's own; elsewhere beta is the KL to the
    # reference, which verl adds itself (use_kl_loss).
    if name != "disco" and options.get("beta") not in (None, 0):
        raise ConfigError(name, "beta", options["beta"], "is verl's KL loss (use_kl_loss, kl_loss_coef), not the loss's")
    cfg = parse_config(name, options)
    low, high = _clip_range(actor_config)
    if name in ("grpo", "dapo", "dr_grpo", "gspo") or (verl_conventions and name == "gmpo"):
        # GMPO under verl's conventions: geo_mean clips the log-ratio to [-clip_ratio_low, clip_ratio_high].
        if low is not None:
            cfg["epsilon"] = low
        if high is not None:
            cfg["epsilonHigh"] = high
    if verl_conventions and name == "cispo":
        # verl's cispo clamps the IS weight to [1 - clip_ratio_low, 1 + clip_ratio_high].
        if low is not None:
            cfg["epsilonLow"] = low
        if high is not None:
            cfg["epsilonMax"] = 1 + high
    if name in DUAL_CLIP:
        _dual_clip(name, actor_config, options, cfg)
    if name == "sapo":
        for verl_key, key in (("tau_pos", "temperaturePos"), ("tau_neg", "temperatureNeg")):
            if _get(actor_config, verl_key) is not None:
                cfg[key] = float(_get(actor_config, verl_key))
    if "lossType" in cfg and loss_agg_mode is not None:
        if loss_agg_mode not in VERL_AGGREGATION:
            raise ConfigError(name, "loss_agg_mode", loss_agg_mode,
                              "has no equivalent here; use one of %s" % ", ".join(VERL_AGGREGATION))
        cfg["lossType"] = VERL_AGGREGATION[loss_agg_mode]
    if verl_conventions and name in ("gspo", "sapo"):
        cfg["lossType"] = "grpo"  # verl's gspo and sapo aggregate seq-mean-token-mean whatever loss_agg_mode says
    if cfg.get("lossType") == "dr_grpo" and (verl_conventions or _get(actor_config, "loss_scale_factor") is not None):
        # verl divides by loss_scale_factor, or by the response width when it is null.
        cfg["maxCompletionLength"] = _get(actor_config, "loss_scale_factor")
    if "overlong" in cfg:
        # Applied to the rewards by ``rlvr_group`` (it sees the lengths); the loss gets the shaped advantages.
        cfg["overlong"] = None
    return cfg


def row_values(advantages, response_mask):
    """Each row's value of a per-token tensor that an outcome estimator broadcast over the row (times the mask):
    the value at its first response token, or at its first position for a row without one (0 there, but with
    its sign: the -0.0 of a dropped row survives the mask; verl has no empty responses, where a negative
    advantage times the mask would read as -0.0 too)."""
    first = torch.argmax((response_mask > 0).to(torch.int64), dim=1)
    return advantages.gather(1, first.unsqueeze(1)).squeeze(1).tolist()


def _finite_advantages(advantages, response_mask):
    """The advantages verl passes, finite at every response token (else a BatchError naming them, flat index)."""
    on = (response_mask > 0).reshape(-1)
    flat = advantages.detach().reshape(-1)
    bad = torch.nonzero(on & ~torch.isfinite(flat))
    if bad.numel() > 0:
        i = int(bad[0, 0])
        raise BatchError(INPUT_NAMES["advantages"], "is %r at a response token" % float(flat[i]), i, "non-finite")


def _run_loss(name, batch, cfg):
    """The objective on the batch, a bad input named as verl passed it."""
    try:
        return LOSSES[name](batch, cfg)
    except BatchError as e:
        raise renamed(e, INPUT_NAMES) from None


def _global_scale(actor_config, rows, kind):
    """verl's newer workers normalise a micro-batch by the global batch (``config.global_batch_info``): the factor
    that turns this micro-batch's mean over its rows (or tokens) into its share of that."""
    info = _get(actor_config, "global_batch_info") or {}
    dp = info.get("dp_size") or 1
    if kind == "tokens" and info.get("batch_num_tokens") is not None:
        return None, info["batch_num_tokens"] / dp
    if kind == "rows" and info.get("global_batch_size") is not None:
        return rows / (info["global_batch_size"] / dp), None
    return 1.0, None


def _advantage_loss(name):
    def loss_fn(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", config=None,
                rollout_is_weights=None):
        run = run_config()
        cfg = objective_config(name, config, loss_agg_mode, run)
        if rollout_is_weights is not None:
            raise ConfigError(name, "rollout_is_weights", "set", "is not supported by the rlvr losses (turn off "
                                                                 "algorithm.rollout_correction)")
        b = log_prob.shape[0]
        _finite_advantages(advantages, response_mask)
        values = row_values(advantages, response_mask)
        # rlvr_group writes -0.0 for the rows DAPO's dynamic sampling drops (their advantage is 0 anyway; a kept
        # row's exact 0 is +0.0, since r - mean is +0.0 when they are equal).
        keep = [not (v == 0 and math.copysign(1.0, v) < 0) for v in values]
        batch = RolloutBatch(log_probs=log_prob, mask=response_mask.to(log_prob.dtype), rewards=[0.0] * b,
                             group_ids=list(range(b)), old_log_probs=old_log_prob, advantages=values, keep=keep)
        token_level = cfg.get("lossType") == "dapo"
        scale, tokens = _global_scale(config, b, "tokens" if token_level else "rows")
        if tokens is not None:
            batch.num_items_in_batch = tokens
        cfg["numGenerations"] = None
        loss, metrics = _run_loss(name, batch, cfg)
        if conventions(run) == "verl" and (cfg.get("lossType") == "dr_grpo" or name == "gmpo"):
            # verl's seq-mean-token-sum-norm is sum / loss_scale_factor, without Dr. GRPO's 1/B (the rows that
            # count), and neither it nor geo_mean reads global_batch_info (core_algos.py agg_loss, geo_mean).
            if cfg.get("lossType") == "dr_grpo":
                loss = loss * max(1, sum(keep) if cfg.get("dynamicSampling") else b)
            scale = 1.0
        if scale not in (None, 1.0):
            loss = loss * scale
        return loss, _verl_metrics(metrics)

    loss_fn.__name__ = "rlvr_%s_loss" % name
    return loss_fn


def _verl_metrics(metrics):
    # The reward metrics were computed from placeholders (verl reports rewards itself); the rest as floats.
    skip = {"reward", "reward_std", "frac_reward_zero_std", "pass_rate"}
    return {"actor/rlvr/" + k: v.item() for k, v in metrics.items() if k not in skip}


def encode_contrast(rewards, group_ids, margin_fraction, threshold=0.5):
    """Per row, the code ``rlvr_contrast`` writes as the row's advantage: +(g + 1 + f) for a positive, -(g + 1 + f)
    for a negative, g the group's index in the batch, f = k / (2 * 2048) with k = round(2048 m/M) carrying
    ConSPO's scheduled margin as a fraction of its target (Eq. 16). Exact in float32 for under 2048 groups."""
    keys, row_group, _ = group_layout(list(group_ids))
    if len(keys) >= _MAX_GROUPS:
        raise ConfigError("rlvr_contrast", "groups", len(keys), "must be < %d per batch" % _MAX_GROUPS)
    k = int(round(min(1.0, max(0.0, margin_fraction)) * _MARGIN_STEPS))
    frac = k / (2.0 * _MARGIN_STEPS)
    return [(1.0 if r > threshold else -1.0) * (row_group[i] + 1 + frac) for i, r in enumerate(rewards)]


def decode_contrast(codes):
    """(rewards 1/0, group ids, margin fraction) from ``encode_contrast``'s codes; a row coded 0 (no response
    token) is its own group of one negative."""
    rewards, groups, fraction = [], [], 0.0
    for i, c in enumerate(codes):
        mag = abs(c)
        if mag == 0:
            rewards.append(0.0)
            groups.append(-1 - i)
            continue
        whole = math.floor(mag)
        rewards.append(1.0 if c > 0 else 0.0)
        groups.append(int(whole) - 1)
        fraction = round((mag - whole) * 2 * _MARGIN_STEPS) / _MARGIN_STEPS
    return rewards, groups, fraction


def _contrast_loss(name):
    def loss_fn(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode="token-mean", config=None,
                rollout_is_weights=None):
        cfg = objective_config(name, config, None)
        if rollout_is_weights is not None:
            raise ConfigError(name, "rollout_is_weights", "set", "is not supported by the rlvr losses")
        _finite_advantages(advantages, response_mask)
        rewards, groups, fraction = decode_contrast(row_values(advantages, response_mask))
        cfg["positiveThreshold"], cfg["numGenerations"] = 0.5, None
        if name == "conspo" and cfg["marginSchedule"] == "cosine":
            # The estimator ran the schedule (it sees the steps); the loss gets the margin it reached.
            cfg["marginSchedule"], cfg["margin"] = "fixed", cfg["margin"] * fraction
        b = log_prob.shape[0]
        batch = RolloutBatch(log_probs=log_prob, mask=response_mask.to(log_prob.dtype), rewards=rewards,
                             group_ids=groups, old_log_probs=old_log_prob)
        loss, metrics = _run_loss(name, batch, cfg)
        scale, _ = _global_scale(config, b, "rows")
        if scale not in (None, 1.0):
            loss = loss * scale
        return loss, _verl_metrics(metrics)

    loss_fn.__name__ = "rlvr_%s_loss" % name
    return loss_fn


POLICY_LOSSES = {LOSS_NAMES[n]: (_advantage_loss(n) if n in USES_ADVANTAGES else _contrast_loss(n)) for n in LOSSES}


def _outcome(token_level_rewards, response_mask, values):
    adv = torch.tensor(values, dtype=token_level_rewards.dtype, device=token_level_rewards.device).unsqueeze(-1)
    adv = adv * response_mask
    return adv, adv


def sequence_rewards(token_level_rewards):
    """Each row's reward (the sum of its token-level rewards), finite: a NaN or infinite reward is a BatchError
    naming ``token_level_rewards`` and the row, not a NaN advantage or a silent 0."""
    rewards = token_level_rewards.sum(-1).tolist()
    for i, r in enumerate(rewards):
        if not math.isfinite(r):
            raise BatchError("token_level_rewards", "sums to %r in this row, must be finite" % r, i, "non-finite")
    return rewards


def _scaling(run, section):
    opts = dict(RCC_ADVANTAGES if section == "rcc" else {"scaleRewards": "group", "stdMode": "population",
                                                          "advantageEpsilon": 0.0})
    source = (run.get("rcc") or {}) if section == "rcc" else (run.get("options") or {})
    for key in ("scaleRewards", "stdMode", "advantageEpsilon"):
        if source.get(key) is not None:
            opts[key] = source[key]
    return opts


def compute_group_advantage(token_level_rewards, response_mask, index=None, config=None, **kwargs):
    """``rlvr_group``: A_i = (r_i - mean_g r) / (std_g + epsilon) with the run's scaling options (Eq. 1); for the
    GRPO family, DAPO's soft overlong punishment on the rewards first (the lengths are the response masks'), and
    its dynamic sampling as -0.0 on the rows of all-equal groups (``rlvr_grpo`` & co. drop those rows)."""
    run = run_config()
    rewards = sequence_rewards(token_level_rewards)
    groups = list(index)
    objective = run.get("objective") or "grpo"
    cfg = parse_config(objective, run.get("options") or {}) if objective in USES_ADVANTAGES else {}
    shaped = rewards
    if cfg.get("overlong") is not None:
        lengths = [int(x) for x in response_mask.sum(-1).tolist()]
        shaped = apply_soft_overlong(rewards, lengths, cfg["overlong"])
    scaling = {k: cfg[k] for k in ("scaleRewards", "stdMode", "advantageEpsilon")} if cfg else _scaling(run, "options")
    values = group_advantages(shaped, groups, scaling)
    if cfg.get("dynamicSampling"):
        keep = dynamic_sampling_keep(rewards, groups)
        values = [v if k else -0.0 for v, k in zip(values, keep)]
    return _outcome(token_level_rewards, response_mask, values)


class _Steps:
    """Training steps seen by ``rlvr_contrast``: verl calls an estimator once per step, in the driver."""
    count = None


def compute_contrast_advantage(token_level_rewards, response_mask, index=None, config=None, **kwargs):
    """``rlvr_contrast``: each row's class, group and ConSPO's margin, coded for ``rlvr_disco`` / ``rlvr_conspo``."""
    run = run_config()
    if _Steps.count is None:
        _Steps.count = int(run.get("startStep", 0))
    step = _Steps.count
    _Steps.count += 1
    fraction = 1.0
    options = run.get("options") or {}
    if run.get("objective") == "conspo":
        cfg = parse_config("conspo", options)
        total = run.get("totalSteps")
        if cfg["marginSchedule"] == "cosine" and not total:
            raise ConfigError("rlvr_contrast", ENV + ".totalSteps", total, "is needed by the cosine margin (Eq. 16)")
        margin = conspo_margin(cfg, {"step": step, "totalSteps": total or 1})
        fraction = margin / cfg["margin"] if cfg["margin"] > 0 else 0.0
    threshold = parse_config(run.get("objective") or "disco", options)["positiveThreshold"] \
        if run.get("objective") in CONTRASTIVE else 0.5
    rewards = sequence_rewards(token_level_rewards)
    return _outcome(token_level_rewards, response_mask, encode_contrast(rewards, list(index), fraction, threshold))


def compute_rcc_advantage(token_level_rewards, response_mask, index=None, config=None, old_log_probs=None,
                          ref_log_prob=None, **kwargs):
    """``rlvr_rcc``: RCC's advantages (A_i = r_i - b_RCC per group, scaled) from the sequence deltas
    log pi_old - log pi_ref. verl passes an estimator no log-probs: ``rlvr_objectives.verl_rcc`` adds them."""
    if old_log_probs is None or ref_log_prob is None:
        raise ConfigError("rlvr_rcc", "old_log_probs/ref_log_prob", None,
                          "are not passed to estimators by verl: add rlvr_objectives.verl_rcc to "
                          "VERL_USE_EXTERNAL_MODULES, and keep a reference policy (use_kl_loss=True)")
    run = run_config()
    rcc = run.get("rcc") or {}
    t = response_mask.shape[1]
    mask = response_mask.reshape(-1).tolist()
    deltas = sequence_deltas(old_log_probs.reshape(-1).tolist(), ref_log_prob.reshape(-1).tolist(), mask, t,
                             rcc.get("deltaMode", "sum"))
    rewards = sequence_rewards(token_level_rewards)
    values = rcc_advantages(rewards, deltas, list(index), _scaling(run, "rcc"))
    return _outcome(token_level_rewards, response_mask, values)


ADV_ESTIMATORS = {"rlvr_group": compute_group_advantage, "rlvr_contrast": compute_contrast_advantage,
                  "rlvr_rcc": compute_rcc_advantage}


def register(core_algos=None):
    """Register the losses and estimators with verl's registries (``core_algos``: verl.trainer.ppo.core_algos, or
    anything with its ``register_policy_loss`` and ``register_adv_est``). Returns the names registered."""
    if core_algos is None:
        from verl.trainer.ppo import core_algos  # noqa: F811 (lazily: importing this package needs no verl)
    for name, fn in POLICY_LOSSES.items():
        core_algos.register_policy_loss(name)(fn)
    for name, fn in ADV_ESTIMATORS.items():
        core_algos.register_adv_est(name)(fn)
    return sorted(POLICY_LOSSES) + sorted(ADV_ESTIMATORS)


def _register_if_verl():
    try:
        import verl.trainer.ppo.core_algos  # noqa: F401
    except ImportError:
        return None
    return register()


REGISTERED = _register_if_verl()
