"""The package reproduces every golden batch the TypeScript objectives wrote (python/tests/golden, written by
``npm run export:golden``): loss, every metric, and the gradient of the loss w.r.t. the log-probs (torch.autograd,
f64), each to 1e-6 relative, log-ratios past the bound of +-20 among them; it refuses the bad input the TypeScript
refuses with the same BatchError (field, index, kind) and accepts what it accepts with the same loss; RCC's
sequence deltas and advantages likewise."""

import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from golden_util import GOLDEN, REL_TOL, load, rel_err  # noqa: E402
from rlvr_objectives import DEFAULTS, LOG_RATIO_BOUND, LOSSES, BatchError, RolloutBatch, parse_config  # noqa: E402
from rlvr_objectives.advantages import RCC_ADVANTAGES, rcc_advantages, sequence_deltas  # noqa: E402

# Every objective the TypeScript exporter wrote (a new one there fails here until the package states it too).
OBJECTIVES = sorted(f[:-len(".json")] for f in os.listdir(GOLDEN) if f.endswith(".json") and f not in
                    ("rcc.json", "boxed.json", "rejections.json"))
MIN_CASES = 200
# Golden batches per objective with a completion token whose log-ratio (old or reference) is past the bound.
MIN_PAST_BOUND = 20


def batch_of(raw, log_probs):
    shape = (raw["b"], raw["t"])

    def t(key):
        return torch.tensor(raw[key], dtype=torch.float64).reshape(shape) if key in raw else None

    return RolloutBatch(
        log_probs=log_probs,
        mask=t("mask"),
        rewards=raw["rewards"],
        group_ids=raw["groupIds"],
        old_log_probs=t("oldLogProbs"),
        ref_log_probs=t("refLogProbs"),
        advantages=raw.get("advantages"),
        lengths=raw.get("lengths"),
        max_completion_length=raw.get("maxCompletionLength"),
        num_items_in_batch=raw.get("numItemsInBatch"),
    )


def past_bound(raw):
    """Whether a completion token of the batch has |l - l_old| or |l_ref - l| beyond LOG_RATIO_BOUND."""
    for key in ("oldLogProbs", "refLogProbs"):
        for k, other in enumerate(raw.get(key) or []):
            if raw["mask"][k] == 1 and abs(raw["logProbs"][k] - other) > LOG_RATIO_BOUND:
                return True
    return False


def run_case(name, case):
    """(loss, metrics, grad) of the Python objective on a golden case."""
    raw = case["batch"]
    lp = torch.tensor(raw["logProbs"], dtype=torch.float64).reshape(raw["b"], raw["t"]).requires_grad_(True)
    loss, metrics = LOSSES[name](batch_of(raw, lp), case["config"], case["progress"])
    (grad,) = torch.autograd.grad(loss, lp, allow_unused=True)
    grad = torch.zeros_like(lp) if grad is None else grad
    return loss.item(), {k: v.item() for k, v in metrics.items()}, grad.reshape(-1).tolist()


class GoldenObjectives(unittest.TestCase):
    worst = {}

    def test_every_golden_objective_is_stated(self):
        self.assertEqual(len(OBJECTIVES), 9)
        self.assertEqual(sorted(LOSSES), OBJECTIVES)

    def check_objective(self, name):
        golden = load(name + ".json")
        self.assertEqual(golden["objective"], name)
        self.assertGreaterEqual(len(golden["cases"]), MIN_CASES)
        self.assertGreaterEqual(sum(1 for c in golden["cases"] if past_bound(c["batch"])), MIN_PAST_BOUND, name)
        # The Python defaults are the TypeScript ones.
        self.assertEqual(DEFAULTS[name], golden["defaults"])
        worst = 0.0
        for i, case in enumerate(golden["cases"]):
            # The full record the TypeScript parser returned parses to itself here.
            self.assertEqual(parse_config(name, case["config"]), case["config"], "%s case %d config" % (name, i))
            loss, metrics, grad = run_case(name, case)
            where = "%s case %d" % (name, i)
            errs = [("loss", rel_err(loss, case["loss"]))]
            self.assertEqual(sorted(metrics), sorted(case["metrics"]), where + " metric names")
            errs += [("metric " + k, rel_err(metrics[k], v)) for k, v in case["metrics"].items()]
            self.assertEqual(len(grad), len(case["grad"]), where + " gradient size")
            errs += [("grad[%d]" % j, rel_err(g, e)) for j, (g, e) in enumerate(zip(grad, case["grad"]))]
            for what, err in errs:
                self.assertLessEqual(err, REL_TOL, "%s: %s off by %.3g relative" % (where, what, err))
                worst = max(worst, err)
        GoldenObjectives.worst[name] = (len(golden["cases"]), worst)


for _name in OBJECTIVES:
    setattr(GoldenObjectives, "test_" + _name, lambda self, n=_name: self.check_objective(n))


def written(v):
    """A number of rejections.json: NaN and +-Infinity travel as strings."""
    return float(v)


class GoldenRejections(unittest.TestCase):
    """Each bad batch the TypeScript objective refused, refused here with the same BatchError; each it accepted (a
    bad value in padding), accepted with the same loss."""

    def test_rejections(self):
        cases = load("rejections.json")["cases"]
        self.assertGreaterEqual(len(cases), MIN_CASES)
        seen = set()
        for i, case in enumerate(cases):
            raw, patch = dict(case["batch"]), case["patch"]
            values = list(raw[patch["field"]])
            values[patch["index"]] = written(patch["value"])
            raw[patch["field"]] = values
            lp = torch.tensor(raw["logProbs"], dtype=torch.float64).reshape(raw["b"], raw["t"]).requires_grad_(True)
            where = "rejections case %d (%s, %s[%d] = %s)" % (i, case["objective"], patch["field"], patch["index"],
                                                              patch["value"])
            if "error" in case:
                with self.assertRaises(BatchError, msg=where) as e:
                    LOSSES[case["objective"]](batch_of(raw, lp), case["config"], case["progress"])
                want = case["error"]
                self.assertEqual((e.exception.field, e.exception.index, e.exception.kind),
                                 (want["field"], want["index"], want["kind"]), where)
                seen.add((want["field"], want["kind"]))
            else:
                loss, _ = LOSSES[case["objective"]](batch_of(raw, lp), case["config"], case["progress"])
                self.assertLessEqual(rel_err(loss.item(), case["loss"]), REL_TOL, where)
                seen.add("accepted")
        # Every kind of refusal the issue names is among the cases, and padding is accepted.
        for field in ("logProbs", "oldLogProbs", "refLogProbs", "rewards", "advantages", "mask"):
            self.assertIn((field, "non-finite"), seen)
        self.assertIn(("mask", "value"), seen)
        self.assertIn("accepted", seen)


class GoldenRcc(unittest.TestCase):
    def test_rcc(self):
        golden = load("rcc.json")
        self.assertEqual(golden["defaults"], RCC_ADVANTAGES)
        self.assertGreaterEqual(len(golden["cases"]), MIN_CASES)
        worst = 0.0
        for i, case in enumerate(golden["cases"]):
            deltas = sequence_deltas(case["oldLogProbs"], case["refLogProbs"], case["mask"], case["t"], case["mode"])
            adv = rcc_advantages(case["rewards"], [d * case["scale"] for d in deltas], case["groupIds"],
                                 case["options"])
            for what, got, want in (("delta", deltas, case["deltas"]), ("advantage", adv, case["advantages"])):
                self.assertEqual(len(got), len(want))
                for j, (g, w) in enumerate(zip(got, want)):
                    err = rel_err(g, w)
                    self.assertLessEqual(err, REL_TOL, "rcc case %d %s[%d]: %r vs %r" % (i, what, j, g, w))
                    worst = max(worst, err)
        GoldenObjectives.worst["rcc"] = (len(golden["cases"]), worst)


def tearDownModule():
    for name, (n, worst) in sorted(GoldenObjectives.worst.items()):
        sys.stderr.write("golden %-8s %4d cases, max relative error %.2e\n" % (name, n, worst))


if __name__ == "__main__":
    unittest.main()
