"""The project's objectives in PyTorch: the same loss, metrics and gradient as src/objectives/*.ts.

One function per objective, ``loss(batch, config, progress=None) -> (loss, metrics)``, over a ``RolloutBatch`` of
[B, T] tensors (any float dtype; the golden test runs f64) and host lists (rewards, group ids, ...). ``config`` is
the full record ``config.parse_config`` returns. The engine adapters (verl_plugin.py, prime_rl.py) build a batch
from what their engine hands a loss.

Conventions carried over exactly, because the gradients depend on them: padding positions are replaced by 0
before use (their gradient is 0, whatever they held); ``clamp`` passes the gradient at its bounds; ``minimum`` and
``maximum`` give each side half the gradient at ties (torch and the TypeScript ops agree on both).
"""

import math

import torch

from .advantages import (apply_soft_overlong, check_group_sizes, dynamic_sampling_keep, group_advantages,
                         group_layout, group_stats)
from .batch import LOG_RATIO_BOUND, Prepared as _Prepared, RolloutBatch, _clamp, bounded_log_ratio  # noqa: F401
from .config import BatchError, parse_config


def masked_mean(x, m):
    """Token mean over the mask: sum(m x) / max(1, sum m)."""
    return (x * m).sum() / torch.clamp(m.sum(), min=1)


def aggregate(x, m, loss_type, rows, max_completion_length, num_items_in_batch=None):
    """Per-token terms to one scalar (aggregate.ts): 'grpo' = seq-mean-token-mean (Eq. 3), 'dapo' = token-mean over
    numItemsInBatch (default this batch's tokens), 'bnpo' = token-mean over this batch, 'dr_grpo' = sum over
    (B * maxCompletionLength)."""
    masked = x * m
    if loss_type == "grpo":
        return (masked.sum(1) / torch.clamp(m.sum(1), min=1)).sum() / max(1, rows)
    if loss_type == "dapo":
        n = num_items_in_batch if num_items_in_batch is not None else torch.clamp(m.sum(), min=1)
        return masked.sum() / n
    if loss_type == "bnpo":
        return masked.sum() / torch.clamp(m.sum(), min=1)
    if loss_type == "dr_grpo":
        return masked.sum() / (max(1, rows) * max_completion_length)
    raise ValueError("unknown loss type %r" % (loss_type,))


def k3(prep):
    """The k3 estimator of KL(pi_theta || pi_ref) per token: exp(d) - d - 1, d = ref - l bounded to
    +-LOG_RATIO_BOUND (verl's low_var_kl bounds it so too)."""
    if prep.ref is None:
        raise BatchError("refLogProbs", "is required when beta > 0", kind="missing")
    d = bounded_log_ratio(prep.ref, prep.logp)
    return torch.exp(d) - d - 1


def _reward_metrics(rewards, group_ids, prep, threshold=0.5):
    stats = group_stats(list(rewards), list(group_ids), threshold)
    q = max(1, len(stats))
    total = 0
    for r in rewards:
        total = total + r
    return {
        "reward": prep.scalar(total / max(1, len(rewards))),
        "reward_std": prep.scalar(_fsum_left([g["rewardStd"] for g in stats]) / q),
        "frac_reward_zero_std": prep.scalar(sum(1 for g in stats if g["rewardStd"] == 0) / q),
        "pass_rate": prep.scalar(_fsum_left([g["passRate"] for g in stats]) / q),
    }


def _fsum_left(xs):
    s = 0
    for x in xs:
        s = s + x
    return s


def _token_metrics(prep):
    logp = prep.logp.detach()
    out = {
        "completions/mean_length": prep.lengths.mean(),
        "ratio/mean": masked_mean(torch.exp(bounded_log_ratio(logp, prep.old)), prep.mask),
    }
    if prep.ref is not None:
        d = bounded_log_ratio(prep.ref, logp)
        out["kl"] = masked_mean(torch.exp(d) - d - 1, prep.mask)
    return out


def _detach(metrics):
    return {k: v.detach() for k, v in metrics.items()}


def _host_advantages(batch, cfg, rewards=None):
    check_group_sizes(list(batch.group_ids), cfg["numGenerations"])
    if batch.advantages is not None:
        return [float(a) for a in batch.advantages]
    return group_advantages(list(batch.rewards if rewards is None else rewards), list(batch.group_ids), cfg)


def _max_length(cfg, batch, prep):
    if cfg.get("maxCompletionLength") is not None:
        return cfg["maxCompletionLength"]
    if batch.max_completion_length is not None:
        return batch.max_completion_length
    return prep.t


def _token_loss(per_token, prep, cfg, batch, mask=None, rows=None):
    """The per-token loss plus beta k3 (TRL adds the KL per token, before aggregation), aggregated by ``lossType``."""
    if cfg["beta"] > 0:
        per_token = per_token + k3(prep) * cfg["beta"]
    return aggregate(per_token, prep.mask if mask is None else mask, cfg["lossType"], prep.b if rows is None else rows,
                     _max_length(cfg, batch, prep), batch.num_items_in_batch)


def _base_metrics(prep, rewards, group_ids, threshold=0.5):
    """What every objective reports: the token metrics (length, ratio, KL) and the reward metrics."""
    metrics = dict(_token_metrics(prep))
    metrics.update(_reward_metrics(rewards, group_ids, prep, threshold))
    return metrics


def grpo_loss(batch, cfg, progress=None):
    """GRPO (Eqs. 3-4), and DAPO and Dr. GRPO as its configs: per token rho = exp(l - l_old) (bounded, batch.py),
    f = min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A) (Eq. 4), TRL's delta caps the unclipped rho, verl's
    dual clip f <- max(f, c A) where A < 0; loss per token -f + beta k3, aggregated by ``lossType``."""
    prep = _Prepared(batch)
    rewards = list(batch.rewards)
    if cfg["overlong"] is not None:
        rewards = apply_soft_overlong(rewards, batch.lengths, cfg["overlong"])
    adv = _host_advantages(batch, cfg, rewards)
    keep = None
    if cfg["dynamicSampling"]:
        keep = list(batch.keep) if batch.keep is not None else dynamic_sampling_keep(list(batch.rewards),
                                                                                     list(batch.group_ids))
    rows = sum(1 for k in keep if k) if keep is not None else prep.b
    m = prep.mask * prep.column([1.0 if k else 0.0 for k in keep]) if keep is not None else prep.mask
    a = prep.column(adv)

    ratio = torch.exp(bounded_log_ratio(prep.logp, prep.old))
    clipped = _clamp(ratio, 1 - cfg["epsilon"], 1 + cfg["epsilonHigh"])
    unclipped = ratio if cfg["delta"] is None else _clamp(ratio, None, cfg["delta"])
    surrogate = torch.minimum(unclipped * a, clipped * a)  # Eq. 4
    if cfg["dualClip"] is None:
        objective = surrogate
    else:
        objective = torch.where(a < 0, torch.maximum(surrogate, a * cfg["dualClip"]), surrogate)
    loss = _token_loss(-objective, prep, cfg, batch, m, rows)

    r = ratio.detach()
    low = (r < 1 - cfg["epsilon"]).to(prep.dtype) * (a < 0).to(prep.dtype)
    high = (r > 1 + cfg["epsilonHigh"]).to(prep.dtype) * (a > 0).to(prep.dtype)
    metrics = _base_metrics(prep, rewards, batch.group_ids)
    metrics.update({
        "clip_ratio/low_mean": masked_mean(low, m),
        "clip_ratio/high_mean": masked_mean(high, m),
        "clip_ratio/region_mean": masked_mean(low + high, m),
        "kept_rows_frac": prep.scalar(rows / prep.b),
    })
    if cfg["dualClip"] is not None:
        # verl's pg_clipfrac_lower: A < 0 and the dual clip c A is the active (larger) side.
        active = (a < 0).to(prep.dtype) * ((a * cfg["dualClip"]) > surrogate.detach()).to(prep.dtype)
        metrics["dual_clip_fraction"] = masked_mean(active, m)
    return loss, _detach(metrics)


def gspo_loss(batch, cfg, progress=None):
    """GSPO: s_i = exp((1/L_i) sum_t m (l - l_old)), J = min(s_i A_i, clip(s_i, 1 - eps, 1 + eps_high) A_i) per
    sequence, broadcast over its tokens and aggregated by ``lossType`` (TRL's importance_sampling_level=sequence)."""
    prep = _Prepared(batch)
    a = prep.column(_host_advantages(batch, cfg))
    seq_log_ratio = (bounded_log_ratio(prep.logp, prep.old) * prep.mask).sum(1, keepdim=True) / prep.safe_lengths
    s = torch.exp(seq_log_ratio)
    objective = torch.minimum(s * a, _clamp(s, 1 - cfg["epsilon"], 1 + cfg["epsilonHigh"]) * a)
    loss = _token_loss(-objective, prep, cfg, batch)  # [B, 1], broadcast over the row's tokens
    sd = s.detach()
    low = (sd < 1 - cfg["epsilon"]).to(prep.dtype) * (a < 0).to(prep.dtype)
    high = (sd > 1 + cfg["epsilonHigh"]).to(prep.dtype) * (a > 0).to(prep.dtype)
    non_empty = (prep.mask.sum(1, keepdim=True) > 0).to(prep.dtype)
    metrics = _base_metrics(prep, batch.rewards, batch.group_ids)
    metrics.update({
        "clip_ratio/low_mean": masked_mean(low, prep.mask),
        "clip_ratio/high_mean": masked_mean(high, prep.mask),
        "clip_ratio/region_mean": masked_mean(low + high, prep.mask),
        "seq_ratio/mean": masked_mean(sd, non_empty),
    })
    return loss, _detach(metrics)


def gmpo_loss(batch, cfg, progress=None):
    """GMPO: d = l - l_old (bounded) clipped in log space to [-eps, eps_high] (eps_high None: eps) on the side the
    advantage's sign selects,
    ratio_i = exp((1/L_i) sum_t m d~), J = (1/B) sum_i [L_i > 0] A_i ratio_i; beta > 0 adds beta token-mean k3."""
    prep = _Prepared(batch)
    a = prep.column(_host_advantages(batch, cfg))
    d = bounded_log_ratio(prep.logp, prep.old)
    c = _clamp(d, -cfg["epsilon"], cfg["epsilon"] if cfg["epsilonHigh"] is None else cfg["epsilonHigh"])
    d_tilde = torch.where(a > 0, torch.minimum(d, c), torch.maximum(d, c))
    ratio = torch.exp((d_tilde * prep.mask).sum(1, keepdim=True) / prep.safe_lengths)
    non_empty = (prep.mask.sum(1, keepdim=True) > 0).to(prep.dtype)
    j = (a * ratio * non_empty).sum() / prep.b
    loss = -j
    if cfg["beta"] > 0:
        loss = loss + masked_mean(k3(prep), prep.mask) * cfg["beta"]
    clipped = (d_tilde.detach() != d.detach()).to(prep.dtype)
    metrics = _base_metrics(prep, batch.rewards, batch.group_ids)
    metrics.update({
        "clip_ratio/region_mean": masked_mean(clipped, prep.mask),
        "seq_ratio/mean": (ratio.detach() * non_empty).sum() / torch.clamp(non_empty.sum(), min=1),
    })
    return loss, _detach(metrics)


def cispo_loss(batch, cfg, progress=None):
    """CISPO: J = sum sg(clip(rho, 1 - eps_low, eps_max)) A l, aggregated by ``lossType`` ('dapo': 1 / sum L).
    Only the gradient is meaningful (the value at rho = 1 is not 0)."""
    prep = _Prepared(batch)
    a = prep.column(_host_advantages(batch, cfg))
    ratio = torch.exp(bounded_log_ratio(prep.logp, prep.old)).detach()
    weight = _clamp(ratio, None if cfg["epsilonLow"] is None else 1 - cfg["epsilonLow"], cfg["epsilonMax"])
    loss = _token_loss(-(weight * a * prep.logp), prep, cfg, batch)
    metrics = _base_metrics(prep, batch.rewards, batch.group_ids)
    metrics["cispo_clip_ratio"] = masked_mean((ratio > cfg["epsilonMax"]).to(prep.dtype), prep.mask)
    return loss, _detach(metrics)


def sapo_loss(batch, cfg, progress=None):
    """SAPO: the gate f(rho) = sigmoid(tau (rho - 1)) 4 / tau, tau = tau_pos if A > 0 else tau_neg, in place of
    the clip; loss per token -f A (+ beta k3), aggregated by ``lossType``."""
    prep = _Prepared(batch)
    adv = _host_advantages(batch, cfg)
    a = prep.column(adv)
    tau = prep.column([cfg["temperaturePos"] if x > 0 else cfg["temperatureNeg"] for x in adv])
    ratio = torch.exp(bounded_log_ratio(prep.logp, prep.old))
    gate = torch.sigmoid(tau * (ratio - 1)) * 4 / tau
    loss = _token_loss(-(gate * a), prep, cfg, batch)
    return loss, _detach(_base_metrics(prep, batch.rewards, batch.group_ids))


class _Contrast:
    """Positives and negatives inside each group (contrast.ts): which rows take part (non-empty ones), N+ and N-,
    valid groups (N+ > 0 and N- > 0), and the pool of each group's negatives (all its rows when it has none)."""

    def __init__(self, batch, prep, threshold, normalizer, active):
        keys, _, members = group_layout(list(batch.group_ids))
        self.members = members
        self.q = len(keys)
        positive = [r > threshold for r in batch.rewards]
        pos_host = prep.column([1.0 if p else 0.0 for p in positive]).reshape(-1)
        neg_host = prep.column([0.0 if p else 1.0 for p in positive]).reshape(-1)
        self.pos = pos_host * active
        self.neg = neg_host * active
        self.n_pos = torch.stack([self.pos[rows].sum() for rows in members])
        self.n_neg = torch.stack([self.neg[rows].sum() for rows in members])
        self.valid = ((self.n_pos > 0) & (self.n_neg > 0)).to(prep.dtype)
        if normalizer == "all":
            self.divisor = max(1, self.q)
        else:
            self.divisor = torch.clamp(self.valid.sum(), min=1)

    def pool(self, g):
        """Row indices pooled as group g's negatives, and a 0/1 selection over them."""
        rows = self.members[g]
        neg = self.neg[rows]
        return rows, neg if bool(neg.sum() > 0) else torch.ones_like(neg)

    def to_rows(self, per_group, b):
        out = [None] * b
        for g, rows in enumerate(self.members):
            for i in rows:
                out[i] = per_group[g]
        return torch.stack(out)

    def neg_lse(self, values):
        """log sum over each group's negative pool of exp(values), [Q] (masked cells at -1e30, as the TypeScript)."""
        out = []
        for g in range(self.q):
            rows, sel = self.pool(g)
            out.append(torch.logsumexp(torch.where(sel > 0, values[rows], torch.full_like(values[rows], -1e30)), 0))
        return torch.stack(out)


def clipped_scores(prep, eps_low, eps_high):
    """Eq. 7: s+ = (1/|o|) sum_t min(rho, 1 + eps_high), s- = (1/|o|) sum_t max(rho, 1 - eps_low), [B] each."""
    ratio = torch.exp(bounded_log_ratio(prep.logp, prep.old))
    length = torch.clamp(prep.lengths, min=1)
    plus = (_clamp(ratio, None, 1 + eps_high) * prep.mask).sum(1) / length
    minus = (_clamp(ratio, 1 - eps_low, None) * prep.mask).sum(1) / length
    return plus, minus


def scheduled_margin(lam, target_margin, alpha):
    """Eq. 16: m = (M/2)(1 - cos(pi min(lambda/alpha, 1))), lambda the training progress in [0, 1]."""
    lam = min(1.0, max(0.0, lam))
    rho = min(lam / alpha, 1.0)
    return min(target_margin, (target_margin / 2) * (1 - math.cos(math.pi * rho)))


def conspo_margin(cfg, progress=None):
    """The margin m_t under the config's schedule; the cosine schedule needs ``progress = {step, totalSteps}``."""
    if cfg["marginSchedule"] == "none":
        return 0.0
    if cfg["marginSchedule"] == "fixed":
        return cfg["margin"]
    if progress is None:
        raise ValueError("conspo: the cosine margin schedule (Eq. 16) needs progress {step, totalSteps}")
    step, total = progress["step"], progress["totalSteps"]
    if not total > 0 or not step >= 0:
        raise ValueError("conspo: progress must have step >= 0 and totalSteps > 0, got %r / %r" % (step, total))
    return scheduled_margin(step / total, cfg["margin"], cfg["alpha"])


def conspo_loss(batch, cfg, progress=None):
    """ConSPO (Sections 4.2-4.3): with s(o) = (1/|o|) sum_t log pi_theta (Eq. 12),
    J_q = (1/N+) sum_i tau log[exp((s_i+ - m)/tau) / (exp((s_i+ - m)/tau) + sum_j exp(s_j-/tau))]   (Eq. 15)
    with the margin m of Eq. 16, averaged over groups; the loss is -J (+ beta token-mean k3). Its gradient is
    Eqs. 13-14's weights on the scores. The Table 6 ablations are options (``contrast: 'linear'`` is Eq. 8,
    ``score: 'clipped-ratio'`` Eq. 7's s+ and s-, ``marginSchedule``)."""
    margin = conspo_margin(cfg, progress)
    prep = _Prepared(batch)
    check_group_sizes(list(batch.group_ids), cfg["numGenerations"])
    if cfg["score"] == "log-likelihood":
        s_pos = s_neg = (prep.logp * prep.mask).sum(1) / torch.clamp(prep.lengths, min=1)
    else:
        s_pos, s_neg = clipped_scores(prep, cfg["epsilon"], cfg["epsilonHigh"])
    active = (prep.lengths > 0).to(prep.dtype)
    ct = _Contrast(batch, prep, cfg["positiveThreshold"], cfg["groupNormalizer"], active)
    shifted = s_pos - margin  # s_i^+ - m_t
    if cfg["contrast"] == "linear":
        # Eq. 8: sqrt(p(1-p)) (mean_+ (s+ - m) - mean_- s-), p = N+ / (N+ + N-).
        n = torch.clamp(ct.n_pos + ct.n_neg, min=1)
        p = ct.n_pos / n
        w = ct.valid * torch.sqrt(p * (1 - p))
        row_pos = ct.pos * ct.to_rows(w / torch.clamp(ct.n_pos, min=1), prep.b)
        row_neg = ct.neg * ct.to_rows(w / torch.clamp(ct.n_neg, min=1), prep.b)
        objective = ((row_pos * shifted).sum() - (row_neg * s_neg).sum()) / ct.divisor
        mean_pos_prob = prep.scalar(0)
    else:
        a = shifted / cfg["tau"]
        neg_lse = ct.neg_lse(s_neg / cfg["tau"])  # log sum_j exp(s_j^- / tau), [Q]
        log_z = torch.logsumexp(torch.stack([a, ct.to_rows(neg_lse, prep.b)], 1), 1)
        log_p = a - log_z  # log P_i^+ (Eq. 11)
        weight = ct.pos * ct.to_rows(ct.valid / torch.clamp(ct.n_pos, min=1), prep.b)
        objective = (weight * (log_p * cfg["tau"])).sum() / ct.divisor
        counted = (weight > 0).to(prep.dtype)
        positive_prob = counted * torch.exp(log_p)
        mean_pos_prob = positive_prob.sum() / torch.clamp(counted.sum(), min=1)
    loss = 0 - objective
    if cfg["beta"] > 0:
        loss = loss + masked_mean(k3(prep), prep.mask) * cfg["beta"]
    sp, sn = s_pos.detach(), s_neg.detach()
    metrics = _base_metrics(prep, batch.rewards, batch.group_ids, cfg["positiveThreshold"])
    metrics.update({
        "margin": prep.scalar(margin),
        "contrastive/pos_prob_mean": mean_pos_prob,
        "groups/valid_frac": ct.valid.sum() / max(1, ct.q),
        "score/pos_mean": (ct.pos * sp).sum() / torch.clamp(ct.pos.sum(), min=1),
        "score/neg_mean": (ct.neg * sn).sum() / torch.clamp(ct.neg.sum(), min=1),
    })
    return loss, _detach(metrics)


def disco_loss(batch, cfg, progress=None):
    """DisCO: scores s = (1/L) sum_t l ('log-l') or (1/L) sum_t rho ('l-ratio'); DisCO-b J_q = mean_+ s - mean_- s,
    DisCO J_q = mean_+ s - tau log sum_- exp(s/tau); loss = -(sum_q J_q)/Q + (beta/2)[KL - delta]_+^2 with KL the
    token mean of l_old - l ('k1') or verl's low_var_kl ('k3')."""
    prep = _Prepared(batch)
    check_group_sizes(list(batch.group_ids), cfg["numGenerations"])
    x = prep.logp if cfg["score"] == "log-l" else torch.exp(bounded_log_ratio(prep.logp, prep.old))
    s = (x * prep.mask).sum(1) / torch.clamp(prep.lengths, min=1)
    active = (prep.lengths > 0).to(prep.dtype)
    ct = _Contrast(batch, prep, cfg["positiveThreshold"], cfg["groupNormalizer"], active)
    pos_mean = torch.stack([(ct.pos[rows] * s[rows]).sum() for rows in ct.members]) / torch.clamp(ct.n_pos, min=1)
    if cfg["variant"] == "disco-b":
        neg_term = torch.stack([(ct.neg[rows] * s[rows]).sum() for rows in ct.members]) / torch.clamp(ct.n_neg,
                                                                                                      min=1)
    else:
        lse = ct.neg_lse(s / cfg["tau"])
        agg = lse if cfg["negativeAggregate"] == "logsumexp" else lse - torch.log(torch.clamp(ct.n_neg, min=1))
        neg_term = agg * cfg["tau"]
    zero = torch.zeros((), dtype=prep.dtype)
    j = torch.where(ct.valid > 0, pos_mean - neg_term, zero).sum() / ct.divisor
    # k1 = l_old - l; k3 = -r + exp(r) - 1 with r = l - l_old bounded (LOG_RATIO_BOUND) before its exp.
    r = bounded_log_ratio(prep.logp, prep.old)
    kl_tokens = prep.old - prep.logp if cfg["klEstimator"] == "k1" else -r + torch.exp(r) - 1
    kl = masked_mean(kl_tokens, prep.mask)
    penalty = torch.square(torch.relu(kl - cfg["delta"])) * (cfg["beta"] / 2)
    loss = (0 - j) + penalty
    sd = s.detach()
    metrics = _base_metrics(prep, batch.rewards, batch.group_ids, cfg["positiveThreshold"])
    metrics.update({
        "disco/kl": kl,
        "disco/constraint_active": (kl > cfg["delta"]).to(prep.dtype),
        "disco/penalty": penalty,
        "groups/valid_frac": ct.valid.sum() / max(1, ct.q),
        "score/pos_mean": (ct.pos * sd).sum() / torch.clamp(ct.pos.sum(), min=1),
        "score/neg_mean": (ct.neg * sd).sum() / torch.clamp(ct.neg.sum(), min=1),
    })
    return loss, _detach(metrics)


# The objectives by the names of src/objectives/registry.ts.
LOSSES = {
    "grpo": grpo_loss,
    "dapo": grpo_loss,
    "dr_grpo": grpo_loss,
    "gspo": gspo_loss,
    "gmpo": gmpo_loss,
    "cispo": cispo_loss,
    "sapo": sapo_loss,
    "disco": disco_loss,
    "conspo": conspo_loss,
}
# Those that weigh rollouts by (precomputed) advantages; the others contrast a group's positives with its negatives.
USES_ADVANTAGES = {"grpo", "dapo", "dr_grpo", "gspo", "gmpo", "cispo", "sapo"}


def compute_loss(objective, batch, options=None, progress=None):
    """The objective's loss and metrics: ``options`` parsed with ``parse_config`` (defaults filled in)."""
    cfg = parse_config(objective, options)
    return LOSSES[objective](batch, cfg, progress)
