"""``rlvr export-data``'s files read back and scored (python/tests/data, written by examples/export-verl-data.ts and
checked against the command by spec/engines/export-data.spec.ts).

Where pyarrow is installed, its reading of every parquet file must equal rows.json (the JavaScript reader's), with
the column types verl reads; without it that comparison is skipped and the rows come from rows.json. Every row's
ground truth then scores 1 with the reward verl calls (``boxed.compute_score``) and prime-rl's taskset calls
(``environment.reward``), and a wrong answer 0. The taskset is built on a stand-in of verifiers' v1 API (verifiers is
not installed here) with the calls verifiers makes: import by id, the one ``Taskset`` in ``__all__``, ``load``.
"""

import asyncio
import importlib
import json
import os
import subprocess
import sys
import types
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from rlvr_objectives import environment  # noqa: E402
from rlvr_objectives.boxed import compute_score, normalize_number  # noqa: E402
from rlvr_objectives.environment import DataError, reward, task_of_row  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
with open(os.path.join(DATA, "rows.json"), encoding="utf-8") as f:
    JS_ROWS = json.load(f)


def have_pyarrow():
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def exported_rows():
    """Each file's rows: pyarrow's reading where it is installed, else the JavaScript reader's."""
    if have_pyarrow():
        return {name: environment.read_rows(os.path.join(DATA, name)) for name in JS_ROWS}
    return JS_ROWS


def wrong_answer(truth):
    """An answer the verifier must refuse: the number with a digit appended, or the text with a letter appended."""
    number = normalize_number(truth)
    return number + "1" if number is not None else truth + "x"


class ReadBack(unittest.TestCase):
    def test_files(self):
        self.assertEqual(sorted(JS_ROWS), sorted(
            "%s/%s" % (d, f) for d in ("addition", "multiplication", "dataset") for f in ("train.parquet", "test.parquet")))

    def test_pyarrow_reads_what_the_javascript_reader_reads(self):
        if not have_pyarrow():
            self.skipTest("pyarrow is not installed: the rows are read from rows.json (hyparquet's reading) only")
        import pyarrow as pa
        import pyarrow.parquet as pq
        for name, rows in JS_ROWS.items():
            path = os.path.join(DATA, name)
            self.assertEqual(environment.read_rows(path), rows, name)
            schema = pq.read_schema(path)
            self.assertEqual(schema.field("data_source").type, pa.string(), name)
            prompt = schema.field("prompt").type
            self.assertTrue(pa.types.is_list(prompt), name)
            self.assertEqual({f.name: f.type for f in prompt.value_type}, {"role": pa.string(), "content": pa.string()})
            reward_model = schema.field("reward_model").type
            self.assertEqual({f.name: f.type for f in reward_model}, {"style": pa.string(), "ground_truth": pa.string()})
            extra = schema.field("extra_info").type
            self.assertEqual({f.name: f.type for f in extra},
                             {"split": pa.string(), "index": pa.int64(), "line": pa.int64()})


class Rows(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rows = exported_rows()

    def test_every_ground_truth_scores_1_and_a_wrong_answer_0(self):
        scored = 0
        for name, rows in self.rows.items():
            for i, row in enumerate(rows):
                messages, truth = task_of_row(row, i, name)
                self.assertEqual([m["role"] for m in messages], ["user"], name)
                right, wrong = "so \\boxed{%s}" % truth, "so \\boxed{%s}" % wrong_answer(truth)
                # verl's call: custom_reward_function(data_source, solution_str, ground_truth, extra_info).
                gt = row["reward_model"]["ground_truth"]
                self.assertEqual(compute_score(row["data_source"], right, gt, row["extra_info"]), 1.0, (name, i))
                self.assertEqual(compute_score(row["data_source"], wrong, gt, row["extra_info"]), 0.0, (name, i))
                # prime-rl's taskset: the reply's text against the ground truth.
                self.assertEqual(reward(right, truth), 1.0, (name, i))
                self.assertEqual(reward(wrong, truth), 0.0, (name, i))
                self.assertEqual(reward(truth, truth), 0.0, (name, i))  # unboxed
                scored += 1
        self.assertEqual(scored, sum(len(r) for r in JS_ROWS.values()))
        sys.stderr.write("export-data: %d rows scored (%s)\n" % (scored, "pyarrow" if have_pyarrow() else "rows.json"))

    def test_splits_and_indices(self):
        for name, rows in self.rows.items():
            split = "train" if name.endswith("train.parquet") else "test"
            self.assertGreater(len(rows), 0, name)
            self.assertEqual([r["extra_info"]["split"] for r in rows], [split] * len(rows), name)
            self.assertEqual([r["extra_info"]["index"] for r in rows], list(range(len(rows))), name)
            self.assertEqual({r["data_source"] for r in rows}, {"rlvr/" + name.split("/")[0]}, name)
            self.assertEqual({r["reward_model"]["style"] for r in rows}, {"rule"}, name)

    def test_arithmetic_ground_truth_is_the_result(self):
        for task, op in (("addition", "+"), ("multiplication", "*")):
            for split in ("train", "test"):
                for row in self.rows["%s/%s.parquet" % (task, split)]:
                    a, b = row["prompt"][0]["content"].rstrip("=").split(op)
                    result = int(a) + int(b) if op == "+" else int(a) * int(b)
                    self.assertEqual(row["reward_model"]["ground_truth"], str(result))
                    self.assertIsNone(row["extra_info"]["line"])

    def test_dataset_rows_are_the_lines_of_the_file(self):
        with open(os.path.join(DATA, "dataset.jsonl"), encoding="utf-8") as f:
            lines = {i + 1: json.loads(line) for i, line in enumerate(f) if line.strip()}
        train, test = self.rows["dataset/train.parquet"], self.rows["dataset/test.parquet"]
        for row in train + test:
            source = lines[row["extra_info"]["line"]]
            self.assertEqual(row["prompt"][0]["content"], source["prompt"])
            self.assertEqual(row["reward_model"]["ground_truth"], str(source["answer"]))
        # Training rows: once each, in file order; held out: none of them.
        train_lines = [r["extra_info"]["line"] for r in train]
        self.assertEqual(train_lines, sorted(set(train_lines)))
        self.assertFalse(set(train_lines) & {r["extra_info"]["line"] for r in test})
        self.assertEqual(len(train_lines) + len({r["extra_info"]["line"] for r in test}), len(lines))


class RowChecks(unittest.TestCase):
    GOOD = {"prompt": [{"role": "user", "content": "1+1="}], "reward_model": {"style": "rule", "ground_truth": "2"}}

    def test_good_row(self):
        self.assertEqual(task_of_row(self.GOOD), ([{"role": "user", "content": "1+1="}], "2"))
        number = dict(self.GOOD, reward_model={"style": "rule", "ground_truth": 2.0})
        self.assertEqual(task_of_row(number)[1], "2")

    def test_bad_rows_name_the_row_and_field(self):
        bad = [
            ({"reward_model": self.GOOD["reward_model"]}, "prompt"),
            (dict(self.GOOD, prompt="1+1="), "prompt"),
            (dict(self.GOOD, prompt=[{"role": "robot", "content": "x"}]), "prompt"),
            (dict(self.GOOD, prompt=[{"role": "user", "content": 3}]), "prompt"),
            (dict(self.GOOD, reward_model={"style": "model", "ground_truth": "2"}), "reward_model"),
            (dict(self.GOOD, reward_model={"style": "rule", "ground_truth": ""}), "reward_model.ground_truth"),
            (dict(self.GOOD, reward_model={"style": "rule", "ground_truth": float("nan")}),
             "reward_model.ground_truth"),
        ]
        for row, field in bad:
            with self.assertRaises(DataError) as ctx:
                task_of_row(row, 7, "f.parquet")
            self.assertEqual(ctx.exception.field, field)
            self.assertTrue(str(ctx.exception).startswith("f.parquet: row 7: %s " % field), str(ctx.exception))


def fake_verifiers():
    """The parts of verifiers.v1 (a60a606e) the taskset uses, as plain classes: TaskData (fields by keyword), Task
    and Taskset (subscriptable generics holding data/config), TasksetConfig, and the stop/reward markers."""
    v1 = types.ModuleType("verifiers.v1")

    class Generic:
        def __class_getitem__(cls, _):
            return cls

    class TaskData:
        def __init__(self, **fields):
            self.__dict__.update(fields)

    class Task(Generic):
        def __init__(self, data, config=None):
            self.data, self.config = data, config

    class TasksetConfig:
        task = None

    class Taskset(Generic):
        def __init__(self, config):
            self.config = config

    def mark(kind):
        def decorator(fn=None, **_):
            def tag(f):
                f.vf_kind = kind
                return f
            return tag(fn) if fn is not None else tag
        return decorator

    v1.TaskData, v1.Task, v1.TasksetConfig, v1.Taskset = TaskData, Task, TasksetConfig, Taskset
    v1.stop, v1.reward, v1.Trace = mark("stop"), mark("reward"), object
    root = types.ModuleType("verifiers")
    root.v1 = v1
    return {"verifiers": root, "verifiers.v1": v1}


class Taskset(unittest.TestCase):
    def tearDown(self):
        environment._classes.clear()
        for name in ("RlvrBoxedData", "RlvrBoxedTask", "RlvrBoxedConfig", "RlvrBoxedTaskset"):
            vars(environment).pop(name, None)

    def test_importing_needs_no_verifiers(self):
        # A fresh interpreter in which verifiers cannot be imported: the module and the shim import, the reward
        # works, and only asking for the taskset needs verifiers.
        code = "\n".join([
            "import sys",
            "sys.modules['verifiers'] = None",
            "import rlvr_boxed, rlvr_objectives.environment as e",
            "assert e.reward('\\\\boxed{2}', '2') == 1.0",
            "try:",
            "    rlvr_boxed.RlvrBoxedTaskset",
            "except ImportError:",
            "    print('needs verifiers')",
        ])
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
        self.assertEqual((done.returncode, done.stdout.strip()), (0, "needs verifiers"), done.stderr)

    def test_taskset_loads_the_rows_and_rewards_with_the_verifier(self):
        rows = exported_rows()["dataset/test.parquet"]
        with mock.patch.dict(sys.modules, fake_verifiers()):
            # As verifiers resolves `id = "rlvr-boxed"`: the module rlvr_boxed, the one Taskset its __all__ exports.
            module = importlib.import_module("rlvr-boxed".replace("-", "_").lower())
            v1 = sys.modules["verifiers.v1"]
            found = [getattr(module, n) for n in module.__all__]
            found = [c for c in found if isinstance(c, type) and issubclass(c, v1.Taskset) and c is not v1.Taskset]
            self.assertEqual(len(found), 1)
            taskset_cls = found[0]
            self.assertIs(taskset_cls, environment.RlvrBoxedTaskset)
            self.assertEqual(taskset_cls.__module__ + "." + taskset_cls.__qualname__,
                             "rlvr_objectives.environment.RlvrBoxedTaskset")
            config = environment.RlvrBoxedConfig()
            self.assertEqual(config.data_file, "")
            with self.assertRaisesRegex(ValueError, "needs data_file"):
                taskset_cls(config).load()
            config.data_file = "dataset/test.parquet"
            with mock.patch.object(environment, "read_rows", return_value=rows) as read:
                tasks = taskset_cls(config).load()
            read.assert_called_once_with("dataset/test.parquet")
            self.assertEqual(len(tasks), len(rows))
            trace = types.SimpleNamespace(num_turns=1, last_reply="")
            for i, (task, row) in enumerate(zip(tasks, rows)):
                self.assertEqual(task.data.idx, i)
                self.assertEqual(task.data.prompt, row["prompt"])
                truth = row["reward_model"]["ground_truth"]
                self.assertEqual(task.data.answer, truth)
                trace.last_reply = "The answer is \\boxed{%s}" % truth
                self.assertEqual(asyncio.run(task.boxed(trace)), 1.0)
                trace.last_reply = "The answer is \\boxed{%s}" % wrong_answer(truth)
                self.assertEqual(asyncio.run(task.boxed(trace)), 0.0)
                self.assertTrue(asyncio.run(task.single_turn(trace)))
            self.assertEqual(tasks[0].boxed.vf_kind, "reward")


if __name__ == "__main__":
    unittest.main()
