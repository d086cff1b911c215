"""The objectives as prime-rl custom losses (written against prime-rl 559b44772e471d1538537b8805cc77f3824a5e64,
v0.8.1.dev67): ``[trainer.loss] type = "custom"``, ``import_path = "rlvr_objectives.prime_rl.<name>_loss"``,
``[trainer.loss.kwargs]`` the objective's options (the project's names, camelCase or snake_case).

prime-rl calls a custom loss once per sequence, ``fn(inputs: LossInputs, **kwargs) -> LossOutputs``, sums the
returned losses over the micro-batch and divides by the global count of loss tokens. So each function here returns
the sum over its tokens of the objective's per-token term, and the whole is the objective under the 'dapo'
(token-mean) aggregation, the only one prime-rl's normaliser allows (another ``lossType`` is refused).

Carried: ``grpo_loss``, ``dapo_loss``, ``dr_grpo_loss`` (the clipped family, its dual clip and delta),
``gspo_loss``, ``cispo_loss``, ``sapo_loss``. Not carried, because one sequence's loss cannot see its group:
DisCO and ConSPO (they contrast a group's positives with its negatives), GMPO (its 1/B sequence mean has no
equivalent under a token-count normaliser), DAPO's dynamic sampling (prime-rl's orchestrator would have to drop
the groups), and a KL term to the reference (prime-rl's GRPO algorithm ships no reference log-probs). prime-rl's
GRPO advantage is r - mean (the project's ``scaleRewards: 'none'``).

Typed loosely: prime-rl's ``LossInputs`` / ``LossOutputs`` are used when prime-rl is importable, a stand-in with the
same fields otherwise, so this module imports (and is tested) without prime-rl.
"""

from dataclasses import dataclass

import torch

from .batch import renamed
from .config import BatchError, ConfigError, parse_config
from .losses import LOSSES, RolloutBatch

try:  # pragma: no cover - prime-rl is not installed where the tests run
    from prime_rl.trainer.rl.loss import LossOutputs
except ImportError:

    @dataclass
    class LossOutputs:
        """prime-rl's ``LossOutputs``: a scalar loss and per-sequence metrics."""

        loss: torch.Tensor
        metrics: dict


CARRIED = ("grpo", "dapo", "dr_grpo", "gspo", "cispo", "sapo")
# A bad input is a BatchError naming prime-rl's LossInputs field (batch.py's checks: finite values at loss tokens).
INPUT_NAMES = {"logProbs": "inputs.trainer_logprobs", "oldLogProbs": "inputs.inference_logprobs",
               "mask": "inputs.loss_mask", "advantages": "inputs.advantages"}


def sequence_config(name, kwargs):
    """The objective's config for a per-sequence loss, refusing what prime-rl cannot carry (named)."""
    cfg = parse_config(name, kwargs)
    if cfg.get("lossType", "dapo") != "dapo":
        raise ConfigError(name, "lossType", cfg["lossType"], "must be dapo (token-mean): prime-rl divides the summed "
                                                            "sequence losses by its global token count")
    for key in ("dynamicSampling", "overlong"):
        if cfg.get(key):
            raise ConfigError(name, key, cfg[key], "needs the whole group, which a per-sequence loss does not see")
    if cfg.get("beta", 0) > 0:
        raise ConfigError(name, "beta", cfg["beta"], "needs reference log-probs, which prime-rl's GRPO does not ship")
    return cfg


def sequence_loss(name, inputs, **kwargs):
    """One sequence's loss: the sum of the objective's per-token terms over ``inputs.loss_mask``."""
    cfg = sequence_config(name, kwargs)
    if inputs.loss_weights is not None and not bool(torch.all(inputs.loss_weights[inputs.loss_mask] == 1)):
        raise ConfigError(name, "loss_weights", "set", "per-token weights are not supported by the rlvr losses")
    mask = inputs.loss_mask.reshape(1, -1).to(inputs.trainer_logprobs.dtype)
    on = inputs.loss_mask.reshape(-1).to(torch.bool)
    advantages = inputs.advantages.reshape(-1).detach()
    bad = torch.nonzero(on & ~torch.isfinite(advantages))
    if bad.numel() > 0:
        i = int(bad[0, 0])
        raise BatchError(INPUT_NAMES["advantages"], "is %r at a loss token" % float(advantages[i]), i, "non-finite")
    adv = advantages[on]
    advantage = float(adv[0]) if adv.numel() > 0 else 0.0
    batch = RolloutBatch(
        log_probs=inputs.trainer_logprobs.reshape(1, -1),
        mask=mask,
        rewards=[0.0],
        group_ids=[0],
        old_log_probs=inputs.inference_logprobs.reshape(1, -1),
        advantages=[advantage],
        # 'dapo' over one item: the sum over the sequence's tokens; prime-rl divides by the global token count.
        num_items_in_batch=1,
    )
    cfg["numGenerations"] = None
    try:
        loss, metrics = LOSSES[name](batch, cfg)
    except BatchError as e:
        raise renamed(e, INPUT_NAMES) from None
    skip = {"reward", "reward_std", "frac_reward_zero_std", "pass_rate", "kept_rows_frac"}
    return LossOutputs(loss=loss, metrics={"rlvr/" + k: v for k, v in metrics.items() if k not in skip})


def grpo_loss(inputs, **kwargs):
    return sequence_loss("grpo", inputs, **kwargs)


def dapo_loss(inputs, **kwargs):
    # DAPO's dynamic sampling is on by default in the project; prime-rl cannot apply it per sequence.
    return sequence_loss("dapo", inputs, **dict({"dynamicSampling": False}, **kwargs))


def dr_grpo_loss(inputs, **kwargs):
    return sequence_loss("dr_grpo", inputs, **kwargs)


def gspo_loss(inputs, **kwargs):
    return sequence_loss("gspo", inputs, **kwargs)


def cispo_loss(inputs, **kwargs):
    return sequence_loss("cispo", inputs, **kwargs)


def sapo_loss(inputs, **kwargs):
    return sequence_loss("sapo", inputs, **kwargs)
