"""The Python verifier gives the TypeScript rewards (src/tasks/boxed.ts, dataset.ts) on every golden string: the
task generators' answers and the adversarial strings (nesting, several boxes, whitespace of every kind, signs,
leading zeros, decimals, unicode, empty, \\boxed without braces, \\fbox, ...)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from golden_util import load  # noqa: E402
from rlvr_objectives.boxed import (compute_score, extract_boxed, normalize_number, verify_boxed,  # noqa: E402
                                   verify_boxed_number)


class GoldenBoxed(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cases = load("boxed.json")["cases"]

    def test_counts(self):
        adversarial = [c for c in self.cases if c["source"] == "adversarial"]
        tasks = {c["source"] for c in self.cases} - {"adversarial"}
        self.assertGreaterEqual(len(adversarial), 1000)
        self.assertEqual(tasks, {"addition", "multiplication", "countdown"})
        # Both outcomes occur on both kinds, so agreement is not agreement on a constant.
        for kind in (adversarial, [c for c in self.cases if c["source"] != "adversarial"]):
            self.assertEqual({c["number"] for c in kind}, {0, 1})

    def test_identical_rewards(self):
        mismatches = []
        for c in self.cases:
            got = (extract_boxed(c["completion"]), normalize_number(c["completion"]),
                   verify_boxed_number(c["completion"], c["answer"]), verify_boxed(c["completion"], c["answer"]),
                   compute_score("rlvr", c["completion"], c["answer"]))
            want = (c["extracted"], c["normalized"], c["number"], c["text"], float(c["text"]))
            if got != want:
                mismatches.append((c["completion"], c["answer"], got, want))
        self.assertEqual(mismatches, [])
        sys.stderr.write("boxed: %d strings, identical rewards\n" % len(self.cases))

    def test_numeric_ground_truth(self):
        # A parquet column of numbers reaches compute_score as numbers: 12.0 is "12", as JavaScript writes it.
        self.assertEqual(compute_score("x", "so \\boxed{12}", 12.0), 1.0)
        self.assertEqual(compute_score("x", "so \\boxed{-3}", -3), 1.0)
        self.assertEqual(compute_score("x", "so \\boxed{12}", 13), 0.0)


if __name__ == "__main__":
    unittest.main()
