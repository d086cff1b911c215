"""A rollout batch and its checks (src/objectives/batch.ts): what the objectives accept, and what they refuse.

Every objective checks its batch before computing with it, as the TypeScript ``checkBatch`` does on a synchronous
backend, and raises ``BatchError`` naming the field, the flat index of the first bad entry and its kind:

* shapes: ``logProbs`` [B, T] with B, T >= 1 and a float dtype; ``oldLogProbs``, ``refLogProbs`` and ``mask`` of
  its shape and on its device; ``rewards``, ``groupIds``, ``advantages`` and ``lengths`` one entry per row;
* host values: ``rewards``, ``advantages`` and ``lengths`` finite numbers (a NaN reward would otherwise give Dr.
  GRPO a NaN loss and the others a silent 0), ``lengths`` non-negative integers, ``maxCompletionLength`` and
  ``numItemsInBatch`` positive; a group id that is a float must be finite (verl's are strings);
* tensor values: ``mask`` 0 or 1; ``logProbs``, ``oldLogProbs`` and ``refLogProbs`` finite at every completion token
  (padding may hold anything: the objectives replace it by 0 before use).

The objectives then exponentiate log-ratios bounded to +-``LOG_RATIO_BOUND`` (see ``bounded_log_ratio``), so a
finite batch gives a finite loss and gradient in f32 too.
"""

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import torch

from .config import BatchError

# The bound on a log-ratio before it is exponentiated (batch.ts LOG_RATIO_BOUND): every ratio exp(l - l_old), and
# k3's exp(l_ref - l), is computed from the log-ratio clamped to [-20, 20], the bound verl's own losses clamp to
# (core_algos.py). e^20 = 4.9e8 keeps a ratio times an advantage finite in f32, where exp(100) is inf; past the
# bound a token's ratio is constant, so no gradient flows through it.
LOG_RATIO_BOUND = 20.0


@dataclass
class RolloutBatch:
    """B rollouts of up to T tokens (src/objectives/batch.ts). ``log_probs`` is the only input differentiated;
    ``old_log_probs`` None means on-policy (pi_old = sg(pi_theta))."""

    log_probs: torch.Tensor
    mask: torch.Tensor
    rewards: Sequence[float]
    group_ids: Sequence[object]
    old_log_probs: Optional[torch.Tensor] = None
    ref_log_probs: Optional[torch.Tensor] = None
    advantages: Optional[Sequence[float]] = None
    lengths: Optional[Sequence[int]] = None
    max_completion_length: Optional[float] = None
    num_items_in_batch: Optional[float] = None
    # DAPO's dynamic-sampling rows, when an engine decided them already (verl: ``rlvr_group`` marks the rows it drops);
    # None: computed from the rewards, as the TypeScript does.
    keep: Optional[Sequence[bool]] = None


def _clamp(x, lo=None, hi=None):
    # where(x < lo, lo, x): the gradient passes at the bound itself, as the TypeScript clamp's does.
    if lo is not None:
        x = torch.where(x < lo, torch.full_like(x, lo), x)
    if hi is not None:
        x = torch.where(x > hi, torch.full_like(x, hi), x)
    return x


def bounded_log_ratio(a, b):
    """clamp(a - b, -LOG_RATIO_BOUND, LOG_RATIO_BOUND): the log-ratio an objective exponentiates."""
    return _clamp(a - b, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)


def _host_number(x):
    """``x`` as a float, or None when it is not a number (a bool is not one, as in TypeScript)."""
    if isinstance(x, bool):
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _check_host(field, xs, b, required):
    if xs is None:
        if required:
            raise BatchError(field, "is required", kind="missing")
        return
    if len(xs) != b:
        raise BatchError(field, "has length %d, the batch has %d rows" % (len(xs), b), kind="shape")
    for i, x in enumerate(xs):
        v = _host_number(x)
        if v is None or not math.isfinite(v):
            raise BatchError(field, "is %r, must be a finite number" % (x,), i, "non-finite")


def _first(bad):
    """The flat index of the first True of a boolean tensor, or None (one host read)."""
    if not bool(bad.any()):
        return None
    return int(torch.nonzero(bad.reshape(-1))[0, 0])


def check_batch(batch):
    """The checks of the module docstring, in the TypeScript's order; raises ``BatchError`` at the first failure."""
    lp = batch.log_probs
    if lp.dim() != 2 or lp.shape[0] == 0 or lp.shape[1] == 0:
        raise BatchError("logProbs", "must be [B, T] with B, T >= 1, got %s" % list(lp.shape), kind="shape")
    if not lp.is_floating_point():
        raise BatchError("logProbs", "must be a float tensor, got %s" % lp.dtype, kind="value")
    tensors = (("oldLogProbs", batch.old_log_probs), ("refLogProbs", batch.ref_log_probs), ("mask", batch.mask))
    for field, t in tensors:
        if t is None:
            if field == "mask":
                raise BatchError(field, "is required", kind="missing")
            continue
        if tuple(t.shape) != tuple(lp.shape):
            raise BatchError(field, "must have the shape of logProbs %s, got %s" % (list(lp.shape), list(t.shape)),
                             kind="shape")
        if t.device != lp.device:
            raise BatchError(field, "lives on %s, logProbs on %s" % (t.device, lp.device), kind="value")
    b = lp.shape[0]
    _check_host("rewards", batch.rewards, b, True)
    if len(batch.group_ids) != b:
        raise BatchError("groupIds", "has length %d, the batch has %d rows" % (len(batch.group_ids), b), kind="shape")
    for i, g in enumerate(batch.group_ids):
        if isinstance(g, float) and not math.isfinite(g):
            raise BatchError("groupIds", "is %r, must be a finite number or a label" % (g,), i, "non-finite")
    _check_host("advantages", batch.advantages, b, False)
    _check_host("lengths", batch.lengths, b, False)
    for i, n in enumerate(batch.lengths or []):
        if float(n) != int(n) or n < 0:
            raise BatchError("lengths", "is %r, must be a nonnegative integer" % (n,), i, "value")
    for field, v in (("maxCompletionLength", batch.max_completion_length),
                     ("numItemsInBatch", batch.num_items_in_batch)):
        if v is None:
            continue
        x = _host_number(v)
        if x is None or not (math.isfinite(x) and x > 0):
            raise BatchError(field, "is %r, must be a positive number" % (v,), kind="value")
    _check_values(batch)


def _check_values(batch):
    mask = batch.mask.detach().reshape(-1)
    if mask.dtype == torch.bool:
        on = mask
    else:
        i = _first((mask != 0) & (mask != 1))
        if i is not None:
            v = float(mask[i])
            raise BatchError("mask", "is %r, must be 0 or 1" % v, i, "value" if math.isfinite(v) else "non-finite")
        on = mask == 1
    for field, t in (("logProbs", batch.log_probs), ("oldLogProbs", batch.old_log_probs),
                     ("refLogProbs", batch.ref_log_probs)):
        if t is None:
            continue
        flat = t.detach().reshape(-1)
        i = _first(on & ~torch.isfinite(flat))
        if i is not None:
            raise BatchError(field, "is %r at a completion token" % float(flat[i]), i, "non-finite")


class Prepared:
    """The batch's tensors made safe to compute with (batch.ts ``prepare``): checked, padding replaced by 0,
    old/ref detached, the lengths L_i and max(1, L_i)."""

    def __init__(self, batch):
        check_batch(batch)
        lp = batch.log_probs
        self.b, self.t, self.dtype = lp.shape[0], lp.shape[1], lp.dtype
        self.mask = batch.mask.to(lp.dtype)
        on = self.mask > 0
        zero = torch.zeros((), dtype=lp.dtype, device=lp.device)
        self.logp = torch.where(on, lp, zero)
        old = batch.old_log_probs if batch.old_log_probs is not None else lp
        self.old = torch.where(on, old.detach().to(lp.dtype), zero)
        ref = batch.ref_log_probs
        self.ref = None if ref is None else torch.where(on, ref.detach().to(lp.dtype), zero)
        self.lengths = self.mask.sum(1)
        self.safe_lengths = torch.clamp(self.mask.sum(1, keepdim=True), min=1)

    def scalar(self, x):
        return torch.tensor(float(x), dtype=self.dtype, device=self.mask.device)

    def column(self, xs):
        return torch.tensor([float(x) for x in xs], dtype=self.dtype, device=self.mask.device).reshape(-1, 1)


def renamed(err, names):
    """``err`` with its field spelled as an engine names it (``names``: batch field -> engine field)."""
    return BatchError(names.get(err.field, err.field), err.reason, err.index, err.kind)
