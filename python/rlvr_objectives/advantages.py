"""Host-side pieces (plain Python floats, as the TypeScript computes them on the host): group layout and statistics,
group-relative advantages, DAPO's overlong penalty and dynamic-sampling filter, RCC's baseline and advantages.

Each function is the one of the same name in src/objectives/ (advantages.ts, groups.ts, dapo.ts, rcc.ts), in the
same order of operations, so the floats agree to the last bits or nearly.
"""

import math

from .config import BatchError

# Eq. 1's advantages as the paper writes them, and TRL's / verl's (Bessel std, + epsilon).
PAPER_ADVANTAGES = {"scaleRewards": "group", "stdMode": "population", "advantageEpsilon": 0.0}
TRL_ADVANTAGES = {"scaleRewards": "group", "stdMode": "bessel", "advantageEpsilon": 1e-4}
VERL_ADVANTAGES = {"scaleRewards": "group", "stdMode": "bessel", "advantageEpsilon": 1e-6}
# RCC's default scaling: population std plus 1e-6 (src/objectives/rcc.ts RCC_ADVANTAGES).
RCC_ADVANTAGES = {"scaleRewards": "group", "stdMode": "population", "advantageEpsilon": 1e-6}


def group_layout(group_ids):
    """Groups in order of first appearance: (keys, row_group, members)."""
    index, keys, members, row_group = {}, [], [], []
    for row, gid in enumerate(group_ids):
        g = index.get(gid)
        if g is None:
            g = len(keys)
            index[gid] = g
            keys.append(gid)
            members.append([])
        members[g].append(row)
        row_group.append(g)
    return keys, row_group, members


def _all_equal(xs):
    return all(x == xs[0] for x in xs)


def group_mean(xs):
    """Exactly the common value when all are equal (a plain sum / n may be off by an ulp)."""
    if not xs:
        return 0.0
    if _all_equal(xs):
        return xs[0]
    return _sum(xs) / len(xs)


def _sum(xs):
    # Left to right from 0, as JavaScript's reduce((s, x) => s + x, 0) (math.fsum would round differently).
    s = 0
    for x in xs:
        s = s + x
    return s


def std_of(xs, mode):
    """Population or Bessel std; 0 when all values are equal (or fewer than two under Bessel)."""
    if not xs or _all_equal(xs):
        return 0.0
    mean = group_mean(xs)
    ss = _sum([(x - mean) ** 2 for x in xs])
    n = len(xs) if mode == "population" else len(xs) - 1
    return math.sqrt(ss / n) if n > 0 else 0.0


def baseline_advantages(rewards, group_ids, opts, baseline):
    """A_i = (r_i - b) / (std + epsilon) per group, exact zeros for all-equal groups (Eq. 1 with b the group mean)."""
    _, _, members = group_layout(group_ids)
    out = [0.0] * len(rewards)
    batch_std = std_of(list(rewards), opts["stdMode"]) if opts["scaleRewards"] == "batch" else 0.0
    for rows in members:
        rs = [rewards[i] for i in rows]
        if _all_equal(rs):
            continue
        mean = baseline(rs, rows)
        if opts["scaleRewards"] == "none":
            denom = 1
        else:
            std = std_of(rs, opts["stdMode"]) if opts["scaleRewards"] == "group" else batch_std
            denom = std + opts["advantageEpsilon"]
        for k, row in enumerate(rows):
            out[row] = (rs[k] - mean) / denom if denom > 0 else 0.0
    return out


def group_advantages(rewards, group_ids, opts):
    return baseline_advantages(rewards, group_ids, opts, lambda rs, rows: group_mean(rs))


def group_stats(rewards, group_ids, threshold=0.5):
    """Per group: size, positives (reward > threshold), pass rate, mean, population std (0 when all equal)."""
    keys, _, members = group_layout(group_ids)
    stats = []
    for g, rows in enumerate(members):
        rs = [rewards[i] for i in rows]
        mean = group_mean(rs)
        std = 0.0 if _all_equal(rs) else math.sqrt(_sum([(r - mean) ** 2 for r in rs]) / len(rs))
        positives = sum(1 for r in rs if r > threshold)
        stats.append({"groupId": keys[g], "size": len(rs), "positives": positives,
                      "passRate": positives / len(rs), "rewardMean": mean, "rewardStd": std})
    return stats


def check_group_sizes(group_ids, num_generations):
    """Every group has exactly G rows when the config fixes G (TRL ``num_generations``)."""
    if num_generations is None:
        return
    keys, _, members = group_layout(group_ids)
    for g, rows in enumerate(members):
        if len(rows) != num_generations:
            raise BatchError("groupIds", "group %r has %d rows, numGenerations is %d"
                             % (keys[g], len(rows), num_generations), rows[0], "shape")


def soft_overlong_penalty(length, max_length, cache_length):
    """DAPO's soft overlong punishment: 0 up to L_max - L_cache, then linear down to -1 at L_max, -1 beyond."""
    expected = max_length - cache_length
    if length <= expected:
        return 0
    if length <= max_length:
        return (expected - length) / cache_length
    return -1


def apply_soft_overlong(rewards, lengths, cfg):
    if lengths is None:
        raise BatchError("lengths", "is required by the soft overlong reward (DAPO `overlong`)", kind="missing")
    if len(lengths) != len(rewards):
        raise BatchError("lengths", "has length %d, rewards %d" % (len(lengths), len(rewards)), kind="shape")
    return [r + cfg["penaltyFactor"] * soft_overlong_penalty(lengths[i], cfg["maxLength"], cfg["cacheLength"])
            for i, r in enumerate(rewards)]


def dynamic_sampling_keep(rewards, group_ids):
    """DAPO's filter: a row is kept when its group's rewards are not all equal."""
    keep = [False] * len(rewards)
    _, _, members = group_layout(group_ids)
    for rows in members:
        r0 = rewards[rows[0]]
        varied = any(rewards[i] != r0 for i in rows)
        for i in rows:
            keep[i] = varied
    return keep


def _mean(xs):
    return _sum(xs) / len(xs)


def rcc_baseline(rewards, deltas):
    """RCC's baseline b = mean(r) + 2 Cov(r, delta), clamped to [min r, max r] (src/objectives/rcc.ts; the first-order
    expansion of b* = E[w^2 r] / E[w^2], w = exp(delta); the clamp keeps it where b* always lies, issue 21)."""
    if len(rewards) != len(deltas) or not rewards:
        raise ValueError("rcc_baseline: rewards (%d) and deltas (%d) must be non-empty and of equal length"
                         % (len(rewards), len(deltas)))
    for name, xs in (("rewards", rewards), ("deltas", deltas)):
        for i, x in enumerate(xs):
            if not math.isfinite(x):
                raise ValueError("rcc_baseline: %s[%d] is %r, must be finite" % (name, i, x))
    mr = _mean(rewards)
    md = _mean(deltas)
    cov = _sum([(r - mr) * (deltas[j] - md) for j, r in enumerate(rewards)]) / len(rewards)
    return min(max(mr + 2 * cov, min(rewards)), max(rewards))


def rcc_advantages(rewards, deltas, group_ids, opts=None):
    """RCC advantages: per group A_i = r_i - b_RCC, scaled as GRPO's (``scaleRewards``, ``stdMode``,
    ``advantageEpsilon``; default ``RCC_ADVANTAGES``)."""
    opts = RCC_ADVANTAGES if opts is None else opts
    if len(rewards) != len(deltas) or len(rewards) != len(group_ids):
        raise ValueError("rcc_advantages: rewards, deltas and group_ids must have one entry per rollout")
    return baseline_advantages(rewards, group_ids, opts, lambda rs, rows: rcc_baseline(rs, [deltas[i] for i in rows]))


def sequence_deltas(old_log_probs, ref_log_probs, mask, completion_len, mode="sum"):
    """Per rollout delta = log pi_old(o|q) - log pi_ref(o|q): the masked sum over tokens, or that sum over max(1, L)
    (``mode="mean"``). Inputs are flat row-major [B * C] sequences of numbers."""
    rows = 0 if completion_len == 0 else len(mask) // completion_len
    out = []
    for r in range(rows):
        total, n = 0, 0
        for t in range(completion_len):
            i = r * completion_len + t
            if mask[i] == 0:
                continue
            total += old_log_probs[i] - ref_log_probs[i]
            n += 1
        out.append(total if mode == "sum" else total / max(1, n))
    return out
