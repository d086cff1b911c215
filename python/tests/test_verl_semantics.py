"""verl's semantics, stated and selectable (issue 38, item 4): the rlvr losses inside verl honour verl's dual clip
(``actor.clip_ratio_c``, which verl's ``vanilla`` applies); ``RLVR_OBJECTIVE_CONFIG``'s ``"conventions": "verl"``
follows verl's built-in losses where they differ from the project's by a convention (the seq-mean-token-sum-norm
factor, GMPO's and CISPO's clip source, GSPO's and SAPO's fixed aggregation); the package declares the
``verl.plugins`` entry point that newer verl loads on import.

The expected values are independent statements of the formulas (python/README.md, "verl's built-in losses"), in
torch, not calls into the package."""

import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.join(HERE, "..")
sys.path.insert(0, PACKAGE_ROOT)

from rlvr_objectives import verl_plugin  # noqa: E402
from rlvr_objectives.config import ConfigError  # noqa: E402

INF = float("inf")


def rollouts(seed=7, b=6, t=5, spread=2.5):
    """A verl micro-batch: log-probs, old log-probs with ratios up to e^spread, a prefix mask with every row
    non-empty, and each row's advantage broadcast over its response tokens (half of them negative)."""
    g = torch.Generator().manual_seed(seed)
    lp = -3 * torch.rand(b, t, generator=g, dtype=torch.float64)
    old = lp - spread * (2 * torch.rand(b, t, generator=g, dtype=torch.float64) - 1)
    lengths = 1 + torch.randint(0, t, (b,), generator=g)
    mask = (torch.arange(t).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.float64)
    row_adv = torch.tensor([1.2, -0.8, 0.5, -1.5, 0.9, -0.3], dtype=torch.float64)[:b]
    return lp, old, mask, row_adv.unsqueeze(1) * mask, row_adv


def token_mean(x, m):
    return (x * m).sum() / m.sum()


def seq_mean_token_mean(x, m):
    return ((x * m).sum(1) / m.sum(1)).mean()


def clipped_surrogate(lp, old, adv, low, high, c):
    """-A * rho~ per token: for A >= 0, rho~ = min(rho, 1 + high) (min(rho A, clip(rho) A) / A); for A < 0,
    rho~ = min(max(rho, 1 - low), c) (the clipped term max(rho A, clip(rho) A), then the dual clip max(., c A))."""
    rho = torch.exp(lp - old)
    pos = torch.clamp(rho, max=1 + high)
    neg = torch.clamp(torch.clamp(rho, min=1 - low), max=c)
    return -adv * torch.where(adv < 0, neg, pos)


def call(name, actor, run, lp, old, adv, mask, agg):
    with mock.patch.dict(os.environ, {verl_plugin.ENV: json.dumps(run)}):
        return verl_plugin.POLICY_LOSSES["rlvr_" + name](old_log_prob=old, log_prob=lp, advantages=adv,
                                                        response_mask=mask, loss_agg_mode=agg, config=actor,
                                                        rollout_is_weights=None)


class Agree:
    """Loss and gradient w.r.t. the log-probs of the package's verl loss against an independent statement."""

    def assert_agree(self, name, actor, run, agg, expected_fn, seed=7, spread=2.5):
        lp, old, mask, adv, _ = rollouts(seed, spread=spread)
        lp1 = lp.clone().requires_grad_(True)
        loss, _ = call(name, actor, run, lp1, old, adv, mask, agg)
        (grad,) = torch.autograd.grad(loss, lp1)
        lp2 = lp.clone().requires_grad_(True)
        want = expected_fn(lp2, old, adv, mask)
        (want_grad,) = torch.autograd.grad(want, lp2)
        self.assertAlmostEqual(loss.item(), want.item(), delta=1e-12 * max(1.0, abs(want.item())))
        self.assertLessEqual((grad - want_grad).abs().max().item(), 1e-12)
        return loss.item()


class DualClip(unittest.TestCase, Agree):
    ACTOR = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28}

    def test_the_batch_has_tokens_the_dual_clip_changes(self):
        lp, old, mask, adv, _ = rollouts()
        active = (adv < 0) & (torch.exp(lp - old) > 3) & (mask > 0)
        self.assertGreaterEqual(int(active.sum()), 3)

    def test_clip_ratio_c_is_verls_dual_clip_as_vanilla_applies_it(self):
        for name, agg, aggregate in (("grpo", "token-mean", token_mean), ("dapo", "token-mean", token_mean),
                                     ("dr_grpo", "seq-mean-token-mean", seq_mean_token_mean)):
            for c in (3.0, 1.5):
                actor = dict(self.ACTOR, clip_ratio_c=c)
                run = {"objective": name, "options": {"dynamicSampling": False}}
                with_dual = self.assert_agree(
                    name, actor, run, agg,
                    lambda lp, old, adv, m, c=c: aggregate(clipped_surrogate(lp, old, adv, 0.2, 0.28, c), m))
                without = self.assert_agree(
                    name, dict(actor, clip_ratio_c=INF), run, agg,
                    lambda lp, old, adv, m: aggregate(clipped_surrogate(lp, old, adv, 0.2, 0.28, INF), m))
                # The dual clip matters on this batch: the two differ by far more than rounding.
                self.assertGreater(abs(with_dual - without), 0.1 * abs(without), name)

    def test_a_bad_clip_ratio_c_is_refused_by_name(self):
        for c in (1.0, 0.5, float("nan"), "three"):
            with self.assertRaises(ConfigError) as e:
                verl_plugin.objective_config("grpo", {"clip_ratio_c": c}, "token-mean", run={})
            self.assertEqual(e.exception.field, "clip_ratio_c")

    def test_the_runs_dual_clip_must_agree_with_clip_ratio_c(self):
        cfg = verl_plugin.objective_config("grpo", {"clip_ratio_c": 3.0}, "token-mean", run={"options": {}})
        self.assertEqual(cfg["dualClip"], 3.0)  # the run says nothing: verl's key decides
        cfg = verl_plugin.objective_config("grpo", {"clip_ratio_c": INF}, "token-mean",
                                           run={"options": {"dualClip": None}})
        self.assertIsNone(cfg["dualClip"])
        cfg = verl_plugin.objective_config("dapo", {"clip_ratio_c": 2.0}, "token-mean",
                                           run={"options": {"clip_ratio_c": 2}})
        self.assertEqual(cfg["dualClip"], 2.0)
        cfg = verl_plugin.objective_config("grpo", {}, "token-mean", run={"options": {"dualClip": 1.5}})
        self.assertEqual(cfg["dualClip"], 1.5)  # not verl's ActorConfig (no key): the run's options decide
        for options in ({"dualClip": None}, {"dualClip": 1.5}, {"dual_clip": 2}):
            with self.assertRaises(ConfigError) as e:
                verl_plugin.objective_config("grpo", {"clip_ratio_c": 3.0}, "token-mean", run={"options": options})
            self.assertEqual(e.exception.field, "clip_ratio_c")
            self.assertIn(list(options)[0], str(e.exception))

    def test_other_losses_do_not_read_it(self):
        for name in ("gspo", "gmpo", "cispo", "sapo"):
            cfg = verl_plugin.objective_config(name, {"clip_ratio_c": 3.0}, "token-mean", run={})
            self.assertNotIn("dualClip", cfg)


class VerlConventions(unittest.TestCase, Agree):
    VERL = {"conventions": "verl"}

    def test_seq_mean_token_sum_norm_divides_by_loss_scale_factor_only(self):
        actor = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.2, "clip_ratio_c": INF, "loss_scale_factor": 16}
        surrogate = lambda lp, old, adv: clipped_surrogate(lp, old, adv, 0.2, 0.2, INF)  # noqa: E731
        b = rollouts()[0].shape[0]
        for name in ("grpo", "dr_grpo"):
            run = {"objective": name}
            self.assert_agree(name, actor, dict(run, **self.VERL), "seq-mean-token-sum-norm",
                              lambda lp, old, adv, m: (surrogate(lp, old, adv) * m).sum() / 16)
            self.assert_agree(name, actor, run, "seq-mean-token-sum-norm",
                              lambda lp, old, adv, m: (surrogate(lp, old, adv) * m).sum() / (b * 16))
        # loss_scale_factor null: verl divides by the response width.
        t = rollouts()[0].shape[1]
        self.assert_agree("dr_grpo", dict(actor, loss_scale_factor=None),
                          {"objective": "dr_grpo", "options": {"maxCompletionLength": 99}, **self.VERL},
                          "seq-mean-token-sum-norm", lambda lp, old, adv, m: (surrogate(lp, old, adv) * m).sum() / t)

    def test_dapo_rows_dropped_by_dynamic_sampling_count_nothing_under_verls_factor(self):
        lp, old, mask, adv, _ = rollouts()
        adv = adv.clone()
        adv[1] = -0.0 * mask[1]  # rlvr_group's mark of a row that dynamic sampling drops
        adv[4] = -0.0 * mask[4]
        actor = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28, "clip_ratio_c": INF, "loss_scale_factor": 8}
        lp1 = lp.clone().requires_grad_(True)
        run = {"objective": "dapo", **self.VERL}
        loss, _ = call("dapo", actor, run, lp1, old, adv, mask, "seq-mean-token-sum-norm")
        want = (clipped_surrogate(lp, old, adv, 0.2, 0.28, INF) * mask).sum() / 8
        self.assertAlmostEqual(loss.item(), want.item(), delta=1e-12)

    def test_gmpo_reads_verls_clip_ratios(self):
        def geo_mean(low, high):
            def expected(lp, old, adv, m):
                row = adv.sum(1) / m.sum(1)
                d = lp - old
                c = torch.clamp(d, -low, high)
                d_tilde = torch.where(row.unsqueeze(1) > 0, torch.minimum(d, c), torch.maximum(d, c))
                ratio = torch.exp((d_tilde * m).sum(1) / m.sum(1))
                return -(row * ratio).mean()
            return expected

        actor = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28}
        run = {"objective": "gmpo", "options": {"epsilon": 0.4}}
        verl = self.assert_agree("gmpo", actor, dict(run, **self.VERL), "token-mean", geo_mean(0.2, 0.28))
        # The project's convention: epsilon (0.4 here, the paper's) on both sides, whatever verl's keys say.
        own = self.assert_agree("gmpo", actor, run, "token-mean", geo_mean(0.4, 0.4))
        self.assertNotAlmostEqual(verl, own, places=3)
        actor = {"clip_ratio": 0.3, "clip_ratio_low": None, "clip_ratio_high": None}
        self.assert_agree("gmpo", actor, dict(run, **self.VERL), "token-mean", geo_mean(0.3, 0.3))

    def test_cispo_clamps_its_weight_to_verls_clip_range(self):
        def cispo(low, high):
            def expected(lp, old, adv, m):
                w = torch.clamp(torch.exp(lp - old), 1 - low, 1 + high).detach()
                return token_mean(-w * adv * lp, m)
            return expected

        actor = {"clip_ratio_low": 0.2, "clip_ratio_high": 0.28}
        run = {"objective": "cispo"}
        self.assert_agree("cispo", actor, dict(run, **self.VERL), "token-mean", cispo(0.2, 0.28))
        # The project's convention: the weight capped at epsilonMax (5), no lower clip.
        self.assert_agree("cispo", actor, run, "token-mean", cispo(1.0, 4.0))

    def test_gspo_and_sapo_aggregate_seq_mean_token_mean_whatever_loss_agg_mode(self):
        def sapo(aggregate):
            def expected(lp, old, adv, m):
                tau = torch.where(adv > 0, torch.full_like(adv, 1.0), torch.full_like(adv, 1.05))
                gate = torch.sigmoid(tau * (torch.exp(lp - old) - 1)) * 4 / tau
                return aggregate(-gate * adv, m)
            return expected

        def gspo(aggregate):
            def expected(lp, old, adv, m):
                s = torch.exp(((lp - old) * m).sum(1, keepdim=True) / m.sum(1, keepdim=True))
                row = adv.sum(1, keepdim=True) / m.sum(1, keepdim=True)
                per_seq = -torch.minimum(s * row, torch.clamp(s, 1 - 3e-4, 1 + 4e-4) * row)
                return aggregate(per_seq.expand_as(m), m)
            return expected

        sapo_actor = {"tau_pos": 1.0, "tau_neg": 1.05}
        gspo_actor = {"clip_ratio_low": 3e-4, "clip_ratio_high": 4e-4}
        for name, actor, expected in (("sapo", sapo_actor, sapo), ("gspo", gspo_actor, gspo)):
            self.assert_agree(name, actor, {"objective": name, **self.VERL}, "token-mean",
                              expected(seq_mean_token_mean))
            self.assert_agree(name, actor, {"objective": name}, "token-mean", expected(token_mean))

    def test_an_unknown_convention_is_refused_by_name(self):
        with self.assertRaises(ConfigError) as e:
            verl_plugin.objective_config("grpo", {}, "token-mean", run={"conventions": "trl"})
        self.assertEqual(e.exception.field, verl_plugin.ENV + ".conventions")


def declared_entry_points():
    """[project.entry-points."verl.plugins"] of python/pyproject.toml."""
    with open(os.path.join(PACKAGE_ROOT, "pyproject.toml"), "rb") as f:
        text = f.read().decode("utf-8")
    try:
        import tomllib
    except ImportError:  # Python < 3.11: the table's lines, read plainly
        section, out = None, {}
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("["):
                section = line
            elif section == '[project.entry-points."verl.plugins"]' and "=" in line:
                key, value = (part.strip() for part in line.split("=", 1))
                out[key] = value.strip('"')
        return out
    return tomllib.loads(text)["project"]["entry-points"].get("verl.plugins", {})


class EntryPoint(unittest.TestCase):
    def test_pyproject_declares_the_verl_plugin(self):
        points = declared_entry_points()
        self.assertEqual(points, {"rlvr_objectives": "rlvr_objectives.verl_plugin"})
        module = importlib.import_module(points["rlvr_objectives"])
        self.assertIn("rlvr_grpo", module.POLICY_LOSSES)

    def test_an_installed_copy_exposes_it_to_importlib_metadata(self):
        """pip install --no-deps --target DIR of a copy of python/ (offline: --no-build-isolation, the setuptools
        at hand), then the verl.plugins group as importlib.metadata sees DIR, and its load()."""
        missing = [m for m in ("pip", "setuptools") if importlib.util.find_spec(m) is None]
        if missing:
            self.skipTest("%s needed to install the package offline" % " and ".join(missing))
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "src")
            shutil.copytree(PACKAGE_ROOT, source, ignore=shutil.ignore_patterns("tests", "build", "*.egg-info",
                                                                                "__pycache__"))
            target = os.path.join(tmp, "site")
            done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                                   "--no-build-isolation", "--target", target, source],
                                  capture_output=True, text=True, timeout=300)
            self.assertEqual(done.returncode, 0, done.stderr)
            probe = ("import importlib.metadata as m, sys; sys.path.insert(0, sys.argv[1]); all = m.entry_points(); "
                     "group = all.select(group='verl.plugins') if hasattr(all, 'select') else all['verl.plugins']; "
                     "eps = [e for e in group if e.name == 'rlvr_objectives']; "
                     "mod = eps[0].load(); print(eps[0].value, mod.__file__.startswith(sys.argv[1]), "
                     "'rlvr_grpo' in mod.POLICY_LOSSES)")
            out = subprocess.run([sys.executable, "-c", probe, target], capture_output=True, text=True, timeout=120,
                                 cwd=tmp, env=dict(os.environ, PYTHONPATH=""))
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout.split(), ["rlvr_objectives.verl_plugin", "True", "True"])


if __name__ == "__main__":
    unittest.main()
