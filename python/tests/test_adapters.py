"""The engine adapters on the golden batches: what verl and prime-rl would call gives the TypeScript loss and
gradient. Neither engine is installed here: the tests call the adapters with the arguments each engine passes
(verl's policy-loss and estimator signatures at b178a3cd, prime-rl's per-sequence LossInputs at 559b4477)."""

import json
import os
import sys
import types
import unittest
from unittest import mock

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from golden_util import REL_TOL, load, rel_err  # noqa: E402
from rlvr_objectives import group_advantages, parse_config  # noqa: E402
from rlvr_objectives import prime_rl, verl_plugin  # noqa: E402
from rlvr_objectives.config import ConfigError  # noqa: E402

ADVANTAGE_OBJECTIVES = ["grpo", "dapo", "dr_grpo", "gspo", "gmpo", "cispo", "sapo"]
VERL_AGG = {"grpo": "seq-mean-token-mean", "dapo": "token-mean", "dr_grpo": "seq-mean-token-sum-norm"}
# Enough matching golden cases per objective that agreement is not an accident of a few (the golden cases draw
# every option; only some are in each engine's reach, e.g. prime-rl's 'dapo' aggregation without a KL term).
MIN_MATCHED = 10


def tensors(raw, requires_grad=True):
    shape = (raw["b"], raw["t"])
    lp = torch.tensor(raw["logProbs"], dtype=torch.float64).reshape(shape).requires_grad_(requires_grad)
    mask = torch.tensor(raw["mask"], dtype=torch.float64).reshape(shape)
    old = torch.tensor(raw["oldLogProbs"], dtype=torch.float64).reshape(shape) if "oldLogProbs" in raw else None
    return lp, mask, old


def host_advantages(case):
    raw, cfg = case["batch"], case["config"]
    if "advantages" in raw:
        return raw["advantages"]
    return group_advantages(raw["rewards"], raw["groupIds"], cfg)


class Checker:
    def __init__(self, test, what):
        self.test, self.what, self.worst, self.count = test, what, 0.0, 0

    def close(self, got, want, where):
        err = rel_err(got, want)
        self.test.assertLessEqual(err, REL_TOL, "%s %s: %r vs %r" % (self.what, where, got, want))
        self.worst = max(self.worst, err)

    def case(self, lp, loss, metrics, case, i):
        """Loss, gradient w.r.t. the log-probs and the adapter's metrics against one golden case."""
        (grad,) = torch.autograd.grad(loss, lp)
        self.close(loss.item(), case["loss"], "case %d loss" % i)
        self.grads(grad.reshape(-1).tolist(), case["grad"], "case %d" % i)
        for k, v in metrics.items():
            self.close(v, case["metrics"][k[len("actor/rlvr/"):]], "case %d %s" % (i, k))
        self.count += 1

    def grads(self, got, want, where):
        self.test.assertEqual(len(got), len(want))
        for j, (g, w) in enumerate(zip(got, want)):
            self.close(g, w, "%s grad[%d]" % (where, j))


class PrimeRl(unittest.TestCase):
    """Sum of the per-sequence losses over the global token count = the TypeScript loss under 'dapo'."""

    def test_carried_objectives(self):
        for name in prime_rl.CARRIED:
            check = Checker(self, "prime-rl " + name)
            for i, case in enumerate(load(name + ".json")["cases"]):
                cfg, raw = case["config"], case["batch"]
                if cfg["lossType"] != "dapo" or cfg.get("dynamicSampling") or cfg.get("overlong") or cfg["beta"]:
                    continue
                lp, mask, old = tensors(raw)
                old = lp.detach() if old is None else old
                adv = host_advantages(case)
                total = 0
                for r in range(raw["b"]):
                    inputs = types.SimpleNamespace(
                        trainer_logprobs=lp[r], inference_logprobs=old[r], ref_logprobs=None,
                        advantages=torch.full((raw["t"],), float(adv[r]), dtype=torch.float64),
                        loss_mask=mask[r] > 0, loss_weights=None)
                    kwargs = {k: v for k, v in cfg.items() if k != "numGenerations"}
                    total = total + getattr(prime_rl, name + "_loss")(inputs, **kwargs).loss
                n = raw.get("numItemsInBatch") or max(1.0, sum(raw["mask"]))
                loss = total / n
                (grad,) = torch.autograd.grad(loss, lp)
                check.close(loss.item(), case["loss"], "case %d loss" % i)
                check.grads(grad.reshape(-1).tolist(), case["grad"], "case %d" % i)
                check.count += 1
            self.assertGreaterEqual(check.count, MIN_MATCHED, name)
            sys.stderr.write("prime-rl %-8s %3d golden batches, max relative error %.2e\n"
                             % (name, check.count, check.worst))

    def test_refusals_name_the_option(self):
        inputs = types.SimpleNamespace(trainer_logprobs=torch.zeros(2), inference_logprobs=torch.zeros(2),
                                       ref_logprobs=None, advantages=torch.ones(2),
                                       loss_mask=torch.tensor([True, True]), loss_weights=None)
        for call, field in ((lambda: prime_rl.grpo_loss(inputs), "lossType"),
                            (lambda: prime_rl.grpo_loss(inputs, lossType="dapo", beta=0.1), "beta"),
                            (lambda: prime_rl.dapo_loss(inputs, dynamicSampling=True), "dynamicSampling"),
                            (lambda: prime_rl.gspo_loss(inputs, loss_type="dapo", epsilonn=0.1), "epsilonn")):
            with self.assertRaises(ConfigError) as e:
                call()
            self.assertEqual(e.exception.field, field)
        self.assertFalse(hasattr(prime_rl, "conspo_loss"))


class FakeActorConfig(dict):
    """What verl's ActorConfig offers a loss: attribute access and .get()."""

    __getattr__ = dict.get


def has_empty_row(raw):
    return any(sum(raw["mask"][r * raw["t"]:(r + 1) * raw["t"]]) == 0 for r in range(raw["b"]))


def token_rewards(raw):
    r = torch.zeros(raw["b"], raw["t"], dtype=torch.float64)
    r[:, 0] = torch.tensor(raw["rewards"], dtype=torch.float64)
    return r


class Verl(unittest.TestCase):
    """verl's path: the rlvr estimator over the rewards and group ids, then the rlvr policy loss per micro-batch."""

    def run_advantage_case(self, name, case):
        cfg, raw = case["config"], case["batch"]
        lp, mask, old = tensors(raw)
        # The dual clip travels as verl's own key only (clip_ratio_c, below), as a verl user sets it.
        run = {"objective": name, "options": {k: v for k, v in dict(cfg, beta=0).items() if k != "dualClip"}}
        with mock.patch.dict(os.environ, {verl_plugin.ENV: json.dumps(run)}):
            advantages, _ = verl_plugin.compute_group_advantage(token_rewards(raw), mask, index=raw["groupIds"])
            actor = FakeActorConfig(global_batch_info={})
            if "epsilon" in cfg and name != "gmpo":
                actor.update(clip_ratio_low=cfg["epsilon"], clip_ratio_high=cfg["epsilonHigh"])
            if "dualClip" in cfg:
                # verl's ActorConfig always has clip_ratio_c (3.0 by default); inf is "no dual clip".
                actor["clip_ratio_c"] = float("inf") if cfg["dualClip"] is None else cfg["dualClip"]
            if name == "sapo":
                actor.update(tau_pos=cfg["temperaturePos"], tau_neg=cfg["temperatureNeg"])
            if cfg.get("lossType") == "dr_grpo":
                actor["loss_scale_factor"] = cfg["maxCompletionLength"] or raw.get("maxCompletionLength")
            if raw.get("numItemsInBatch") is not None:
                actor["global_batch_info"] = {"dp_size": 1, "batch_num_tokens": raw["numItemsInBatch"]}
            fn = verl_plugin.POLICY_LOSSES["rlvr_" + name]
            loss, metrics = fn(old_log_prob=lp.detach() if old is None else old, log_prob=lp, advantages=advantages,
                               response_mask=mask, loss_agg_mode=VERL_AGG.get(cfg.get("lossType"), "token-mean"),
                               config=actor, rollout_is_weights=None)
        return lp, loss, metrics

    def test_advantage_objectives(self):
        dual_clipped = 0
        for name in ADVANTAGE_OBJECTIVES:
            check = Checker(self, "verl " + name)
            for i, case in enumerate(load(name + ".json")["cases"]):
                cfg, raw = case["config"], case["batch"]
                # verl adds the KL itself (use_kl_loss) and has no 'bnpo'; rlvr_group computes the advantages (a
                # golden case with precomputed ones, or lengths other than the masks', is not verl's situation).
                if cfg["beta"] or cfg.get("lossType") == "bnpo" or "advantages" in raw or cfg.get("overlong"):
                    continue
                if has_empty_row(raw):
                    continue  # verl has no empty responses (a row's advantage sign is read at its first token)
                if cfg.get("lossType") == "dr_grpo" and raw.get("numItemsInBatch") is not None:
                    continue
                if cfg.get("lossType") in ("grpo", "dr_grpo", None) and raw.get("numItemsInBatch") is not None:
                    continue
                check.case(*self.run_advantage_case(name, case), case, i)
                dual_clipped += case["metrics"].get("dual_clip_fraction", 0) > 0
            self.assertGreaterEqual(check.count, MIN_MATCHED, name)
            sys.stderr.write("verl     %-8s %3d golden batches, max relative error %.2e\n"
                             % (name, check.count, check.worst))
        # Golden batches where verl's clip_ratio_c, the dual clip, is the active side on some token.
        self.assertGreaterEqual(dual_clipped, MIN_MATCHED)

    def test_contrastive_objectives(self):
        for name in ("disco", "conspo"):
            check = Checker(self, "verl " + name)
            margins = 0
            for i, case in enumerate(load(name + ".json")["cases"]):
                cfg, raw = case["config"], case["batch"]
                if has_empty_row(raw) or (name == "conspo" and cfg["beta"]):
                    continue  # verl has no empty responses; ConSPO's KL is verl's use_kl_loss
                lp, mask, old = tensors(raw)
                run = {"objective": name, "options": cfg, "totalSteps": case["progress"]["totalSteps"],
                       "startStep": case["progress"]["step"]}
                verl_plugin._Steps.count = None
                with mock.patch.dict(os.environ, {verl_plugin.ENV: json.dumps(run)}):
                    advantages, _ = verl_plugin.compute_contrast_advantage(token_rewards(raw), mask,
                                                                           index=raw["groupIds"])
                    loss, metrics = verl_plugin.POLICY_LOSSES["rlvr_" + name](
                        old_log_prob=lp.detach() if old is None else old, log_prob=lp, advantages=advantages,
                        response_mask=mask, loss_agg_mode="token-mean", config=FakeActorConfig(),
                        rollout_is_weights=None)
                if name == "conspo" and cfg["marginSchedule"] == "cosine" and cfg["margin"] > 0:
                    # The margin travels as k / 2048 of its target: within M / 4096 of Eq. 16's value.
                    self.assertLessEqual(abs(metrics["actor/rlvr/margin"] - case["metrics"]["margin"]),
                                         cfg["margin"] / 4096)
                    margins += 1
                    continue
                check.case(lp, loss, metrics, case, i)
            self.assertGreaterEqual(check.count, MIN_MATCHED, name)
            if name == "conspo":
                self.assertGreater(margins, 0)
            sys.stderr.write("verl     %-8s %3d golden batches, max relative error %.2e\n"
                             % (name, check.count, check.worst))

    def test_rcc_estimator(self):
        check = Checker(self, "verl rlvr_rcc")
        for i, case in enumerate(load("rcc.json")["cases"]):
            if case["scale"] != 1:
                continue
            t = case["t"]
            shape = (len(case["rewards"]), t)
            mask = torch.tensor(case["mask"], dtype=torch.float64).reshape(shape)
            raw = {"b": shape[0], "t": t, "rewards": case["rewards"]}
            run = {"rcc": dict(case["options"], deltaMode=case["mode"])}
            with mock.patch.dict(os.environ, {verl_plugin.ENV: json.dumps(run)}):
                adv, _ = verl_plugin.compute_rcc_advantage(
                    token_rewards(raw), mask, index=case["groupIds"],
                    old_log_probs=torch.tensor(case["oldLogProbs"], dtype=torch.float64).reshape(shape),
                    ref_log_prob=torch.tensor(case["refLogProbs"], dtype=torch.float64).reshape(shape))
            got = verl_plugin.row_values(adv, mask)
            for r in range(shape[0]):
                if mask[r].sum() > 0:
                    check.close(got[r], case["advantages"][r], "case %d row %d" % (i, r))
            check.count += 1
        self.assertGreaterEqual(check.count, MIN_MATCHED)
        sys.stderr.write("verl     rlvr_rcc %3d golden cases, max relative error %.2e\n" % (check.count, check.worst))
        with self.assertRaises(ConfigError) as e:
            verl_plugin.compute_rcc_advantage(torch.zeros(1, 1), torch.ones(1, 1), index=[0])
        self.assertIn("verl_rcc", str(e.exception))

    def test_registration(self):
        # Without verl, importing the plugin registers nothing and fails nothing.
        self.assertIsNone(verl_plugin.REGISTERED)
        losses, estimators = {}, {}
        fake = types.SimpleNamespace(
            register_policy_loss=lambda name: lambda fn: losses.setdefault(name, fn),
            register_adv_est=lambda name: lambda fn: estimators.setdefault(name, fn))
        names = verl_plugin.register(fake)
        self.assertEqual(sorted(losses), ["rlvr_" + n for n in sorted(
            ["grpo", "dapo", "dr_grpo", "gspo", "gmpo", "cispo", "sapo", "disco", "conspo"])])
        self.assertEqual(sorted(estimators), ["rlvr_contrast", "rlvr_group", "rlvr_rcc"])
        self.assertEqual(sorted(names), sorted(list(losses) + list(estimators)))

    def test_rcc_hook(self):
        """verl_rcc wraps verl's compute_advantage: rlvr_rcc gets the batch's log-probs, other estimators pass."""
        from rlvr_objectives import verl_rcc
        self.assertIsNone(verl_rcc.INSTALLED)  # no verl here: importing it installs nothing
        calls = []
        trainer = types.SimpleNamespace(compute_advantage=lambda data, est, *a, **k: calls.append(est) or data,
                                        compute_response_mask=None)
        wrapper = verl_rcc.install(trainer)
        self.assertIs(verl_rcc.install(trainer), wrapper)  # once
        case = next(c for c in load("rcc.json")["cases"] if c["scale"] == 1 and c["mode"] == "sum")
        shape = (len(case["rewards"]), case["t"])
        mask = torch.tensor(case["mask"], dtype=torch.float64).reshape(shape)
        data = types.SimpleNamespace(
            batch={"token_level_rewards": token_rewards({"b": shape[0], "t": shape[1], "rewards": case["rewards"]}),
                   "response_mask": mask,
                   "old_log_probs": torch.tensor(case["oldLogProbs"], dtype=torch.float64).reshape(shape),
                   "ref_log_prob": torch.tensor(case["refLogProbs"], dtype=torch.float64).reshape(shape)},
            non_tensor_batch={"uid": case["groupIds"]})
        with mock.patch.dict(os.environ, {verl_plugin.ENV: json.dumps({"rcc": case["options"]})}):
            trainer.compute_advantage(data, "rlvr_rcc")
        got = verl_plugin.row_values(data.batch["advantages"], mask)
        for r in range(shape[0]):
            if mask[r].sum() > 0:
                self.assertLessEqual(rel_err(got[r], case["advantages"][r]), REL_TOL)
        self.assertEqual(calls, [])
        trainer.compute_advantage(data, "grpo")
        self.assertEqual(calls, ["grpo"])

    def test_refusals_name_the_option(self):
        with self.assertRaises(ConfigError) as e:
            verl_plugin.objective_config("grpo", FakeActorConfig(), "seq-mean-token-sum", run={})
        self.assertEqual(e.exception.field, "loss_agg_mode")
        with self.assertRaises(ConfigError) as e:
            verl_plugin.objective_config("grpo", FakeActorConfig(), "token-mean", run={"options": {"beta": 0.1}})
        self.assertEqual(e.exception.field, "beta")
        with self.assertRaises(ConfigError) as e:
            verl_plugin.objective_config("gspo", FakeActorConfig(), "token-mean", run={"objective": "grpo"})
        self.assertIn("objective", e.exception.field)
        self.assertEqual(parse_config("disco", {"beta": 5})["beta"], 5.0)


if __name__ == "__main__":
    unittest.main()
