"""No NaN passes silently (issue 35, item 8): a NaN or infinite input is a BatchError naming it, in the objectives and
through the verl and prime-rl adapters (with the engine's own name for the input); a finite batch gives a finite
loss and gradient, in f32 too, because every log-ratio is bounded to +-20 before exp (spec/objectives/
degenerate.spec.ts states the same of the TypeScript; the golden rejections.json ties the two)."""

import json
import os
import sys
import types
import unittest
from unittest import mock

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rlvr_objectives import LOG_RATIO_BOUND, LOSSES, BatchError, RolloutBatch, parse_config  # noqa: E402
from rlvr_objectives import prime_rl, verl_plugin  # noqa: E402

NAN, INF = float("nan"), float("inf")
# Each objective with its KL term off, and the configs that exponentiate other log-ratios (dual clip, k3 to the
# reference, DisCO's ratio score and k3, ConSPO's clipped-ratio score).
CONFIGS = {
    "grpo": [{}, {"dualClip": 3}, {"beta": 0.04}],
    "dapo": [{}, {"dualClip": 3}, {"beta": 0.04}],
    "dr_grpo": [{}, {"dualClip": 3}, {"beta": 0.04}],
    "gspo": [{}, {"beta": 0.04}],
    "gmpo": [{}, {"beta": 0.04}],
    "cispo": [{}, {"beta": 0.04}],
    "sapo": [{}, {"beta": 0.04}],
    "disco": [{"beta": 0}, {"beta": 0, "score": "l-ratio", "klEstimator": "k3"}],
    "conspo": [{}, {"score": "clipped-ratio", "beta": 0.04}],
}
PROGRESS = {"step": 3, "totalSteps": 10}


def batch(dtype=torch.float64, log_ratio=None, **changes):
    """Two groups of two rows, T = 3, rewards 1/0 in each group, the last token of row 1 padding. ``log_ratio``:
    every completion token's l - l_old and l_ref - l set to alternating +-log_ratio."""
    lp = torch.tensor([[-1.0, -0.5, -2.0], [-0.3, -1.2, -0.7], [-0.9, -1.1, -0.4], [-2.0, -0.2, -0.6]], dtype=dtype)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 1, 1], [1, 1, 1]], dtype=dtype)
    old = lp + torch.tensor([[0.1, -0.2, 0.3], [-0.1, 0.2, 0.0], [0.05, -0.05, 0.1], [0.2, 0.1, -0.3]], dtype=dtype)
    ref = lp - 0.25
    if log_ratio is not None:
        signs = torch.tensor([1.0, -1.0] * 6, dtype=dtype).reshape(4, 3)
        old = lp - signs * log_ratio
        ref = lp - signs * log_ratio
    fields = dict(log_probs=lp, mask=mask, rewards=[1.0, 0.0, 0.0, 1.0], group_ids=[7, 7, 9, 9], old_log_probs=old,
                  ref_log_probs=ref)
    fields.update(changes)
    return RolloutBatch(**fields)


def with_entry(t, row, col, value):
    t = t.clone()
    t[row, col] = value
    return t


class FiniteLoss(unittest.TestCase):
    def test_log_ratios_of_100_in_f32_give_a_finite_loss_and_gradient(self):
        for name, configs in CONFIGS.items():
            for options in configs:
                b = batch(torch.float32, log_ratio=100.0)
                lp = b.log_probs.clone().requires_grad_(True)
                b.log_probs = lp
                loss, metrics = LOSSES[name](b, parse_config(name, options), PROGRESS)
                (grad,) = torch.autograd.grad(loss, lp, allow_unused=True)
                where = "%s %s" % (name, options)
                self.assertTrue(bool(torch.isfinite(loss)), "%s: loss %r" % (where, loss.item()))
                if grad is not None:
                    self.assertTrue(bool(torch.isfinite(grad).all()), "%s: gradient %s" % (where, grad))
                for k, v in metrics.items():
                    self.assertTrue(bool(torch.isfinite(v)), "%s: metric %s = %r" % (where, k, v.item()))

    def test_a_log_ratio_past_the_bound_counts_as_the_bound(self):
        self.assertEqual(LOG_RATIO_BOUND, 20)
        for name, configs in CONFIGS.items():
            for options in configs:
                got = []
                for size in (25.0, 1000.0):
                    b = batch(log_ratio=size)
                    lp = b.log_probs.clone().requires_grad_(True)
                    b.log_probs = lp
                    loss, _ = LOSSES[name](b, parse_config(name, options), PROGRESS)
                    (grad,) = torch.autograd.grad(loss, lp, allow_unused=True)
                    got.append((loss.item(), None if grad is None else grad.tolist()))
                self.assertEqual(got[0], got[1], "%s %s" % (name, options))


class Refused(unittest.TestCase):
    def assert_refused(self, call, field, index, kind="non-finite"):
        with self.assertRaises(BatchError) as e:
            call()
        self.assertEqual((e.exception.field, e.exception.index, e.exception.kind), (field, index, kind),
                         str(e.exception))
        return e.exception

    def test_the_objectives_name_the_input(self):
        for name in CONFIGS:
            cfg = parse_config(name, {"beta": 0} if name == "disco" else {})
            b = batch()
            run = lambda **changes: LOSSES[name](batch(**changes), cfg, PROGRESS)  # noqa: E731
            for bad in (NAN, INF, -INF):
                # A response token (row 1, token 1: flat index 4); in padding (flat index 5) it changes nothing.
                self.assert_refused(lambda: run(log_probs=with_entry(b.log_probs, 1, 1, bad)), "logProbs", 4)
                self.assert_refused(lambda: run(old_log_probs=with_entry(b.old_log_probs, 1, 1, bad)),
                                    "oldLogProbs", 4)
                self.assert_refused(lambda: run(ref_log_probs=with_entry(b.ref_log_probs, 1, 1, bad)),
                                    "refLogProbs", 4)
                rewards = [1.0, 0.0, bad, 1.0]
                self.assert_refused(lambda: run(rewards=rewards), "rewards", 2)
                if name in ("grpo", "dapo", "dr_grpo", "gspo", "gmpo", "cispo", "sapo"):
                    self.assert_refused(lambda: run(advantages=[0.5, bad, -0.5, 0.5]), "advantages", 1)
                clean, _ = run()
                padded, _ = run(log_probs=with_entry(b.log_probs, 1, 2, bad),
                                old_log_probs=with_entry(b.old_log_probs, 1, 2, bad))
                self.assertEqual(padded.item(), clean.item(), name)
            self.assert_refused(lambda: run(mask=with_entry(b.mask, 0, 1, 0.5)), "mask", 1, "value")
            self.assert_refused(lambda: run(mask=with_entry(b.mask, 0, 1, NAN)), "mask", 1, "non-finite")

    def test_prime_rl_names_its_loss_inputs(self):
        def inputs(**changes):
            fields = dict(trainer_logprobs=torch.tensor([-1.0, -0.5, -2.0]),
                          inference_logprobs=torch.tensor([-1.1, -0.4, -2.0]), ref_logprobs=None,
                          advantages=torch.tensor([0.5, 0.5, 0.5]), loss_mask=torch.tensor([True, True, False]),
                          loss_weights=None)
            fields.update(changes)
            return types.SimpleNamespace(**fields)

        for fn in (prime_rl.grpo_loss, prime_rl.dr_grpo_loss, prime_rl.gspo_loss, prime_rl.cispo_loss,
                   prime_rl.sapo_loss):
            call = lambda **changes: fn(inputs(**changes), lossType="dapo")  # noqa: E731
            self.assert_refused(lambda: call(advantages=torch.tensor([0.5, NAN, 0.5])), "inputs.advantages", 1)
            self.assert_refused(lambda: call(advantages=torch.tensor([INF, INF, INF])), "inputs.advantages", 0)
            self.assert_refused(lambda: call(trainer_logprobs=torch.tensor([-1.0, -INF, -2.0])),
                                "inputs.trainer_logprobs", 1)
            self.assert_refused(lambda: call(inference_logprobs=torch.tensor([NAN, -0.4, -2.0])),
                                "inputs.inference_logprobs", 0)
            # Outside the loss mask nothing is read.
            clean = call().loss.item()
            self.assertEqual(call(advantages=torch.tensor([0.5, 0.5, NAN]),
                                  trainer_logprobs=torch.tensor([-1.0, -0.5, NAN])).loss.item(), clean)

    def test_verl_names_its_arguments(self):
        lp = torch.tensor([[-1.0, -0.5], [-0.3, -1.2]], dtype=torch.float64)
        mask = torch.ones(2, 2, dtype=torch.float64)
        adv = torch.tensor([[0.5, 0.5], [-0.5, -0.5]], dtype=torch.float64)
        actor = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.2, "clip_ratio_c": 3.0}
        with mock.patch.dict(os.environ, {verl_plugin.ENV: json.dumps({"objective": "grpo"})}):
            fn = verl_plugin.POLICY_LOSSES["rlvr_grpo"]
            call = lambda **kw: fn(**dict(dict(old_log_prob=lp - 0.1, log_prob=lp, advantages=adv,  # noqa: E731
                                               response_mask=mask, loss_agg_mode="token-mean", config=actor), **kw))
            self.assert_refused(lambda: call(advantages=with_entry(adv, 1, 1, NAN)), "advantages", 3)
            self.assert_refused(lambda: call(log_prob=with_entry(lp, 0, 1, NAN)), "log_prob", 1)
            self.assert_refused(lambda: call(old_log_prob=with_entry(lp, 1, 0, INF)), "old_log_prob", 2)
            self.assert_refused(lambda: call(response_mask=with_entry(mask, 0, 0, 2.0)), "response_mask", 0, "value")
        for estimator in (verl_plugin.compute_group_advantage, verl_plugin.compute_contrast_advantage):
            for bad in (NAN, INF):
                rewards = torch.tensor([[1.0, 0.0], [bad, 0.0]], dtype=torch.float64)
                self.assert_refused(lambda: estimator(rewards, mask, index=["a", "a"]), "token_level_rewards", 1)
        with mock.patch.dict(os.environ, {verl_plugin.ENV: json.dumps({"objective": "disco"})}):
            fn = verl_plugin.POLICY_LOSSES["rlvr_disco"]
            self.assert_refused(lambda: fn(old_log_prob=lp, log_prob=lp, advantages=with_entry(adv, 0, 0, NAN),
                                           response_mask=mask, loss_agg_mode="token-mean", config={}),
                                "advantages", 0)
        self.assert_refused(
            lambda: verl_plugin.compute_rcc_advantage(torch.tensor([[NAN, 0.0], [1.0, 0.0]]), mask, index=["a", "a"],
                                                      old_log_probs=lp, ref_log_prob=lp),
            "token_level_rewards", 0)


if __name__ == "__main__":
    unittest.main()
