"""prime-rl's environment for the prompts ``rlvr export-data`` writes: a ``verifiers`` taskset whose reward is the
``\\boxed{}`` verifier (``boxed.compute_score``, the one verl's ``custom_reward_function`` calls).

prime-rl (559b44772e471d1538537b8805cc77f3824a5e64) runs verifiers' v1 environments
(a60a606ecc4d309247edf9ff92c3eabca362781f): a source names a taskset by id, which verifiers imports as a
top-level module exporting one ``Taskset`` subclass in ``__all__``. The id is ``rlvr-boxed`` (the package
``rlvr_boxed`` beside this one re-exports ``RlvrBoxedTaskset``); its config takes ``data_file``::

    [[orchestrator.train.source]]
    name = "rlvr"
    [orchestrator.train.source.env.taskset]
    id = "rlvr-boxed"
    data_file = "data/train.parquet"

Each row becomes one single-turn task: the row's chat messages as the prompt, its ``reward_model.ground_truth`` as
the answer, rewarded 1.0 when the last ``\\boxed{}`` of the reply is that answer, else 0.0.

verifiers is imported only when the taskset classes are first asked for (``RlvrBoxedTaskset`` through this
module's ``__getattr__``), so the rows and the reward (``read_rows``, ``task_of_row``, ``reward``) work and are
tested without it; reading parquet needs pyarrow (which verifiers' ``datasets`` brings).
"""

import math

from .boxed import _number_text, compute_score

ROLES = ("system", "user", "assistant")
TASKSET_ID = "rlvr-boxed"

__all__ = ["RlvrBoxedTaskset"]


class DataError(ValueError):
    """A row of an exported data file that is not what ``rlvr export-data`` writes: names the file, row and field."""

    def __init__(self, source, row, field, detail):
        super().__init__("%s: row %d: %s %s" % (source, row, field, detail))
        self.source, self.row, self.field = source, row, field


def read_rows(path):
    """The rows of a parquet file as dicts (pyarrow's ``to_pylist``: a list column as a list, a struct as a dict)."""
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ImportError("reading %s needs pyarrow (pip install pyarrow; datasets brings it)" % path) from e
    return pq.read_table(path).to_pylist()


def task_of_row(row, index=0, source="rows"):
    """``(messages, ground_truth)`` of one exported row, checked: ``prompt`` a non-empty list of ``{role, content}``
    messages (roles system, user, assistant; content a string), ``reward_model`` a dict with ``style`` "rule" and a
    ``ground_truth`` (a string, or a finite number read as its decimal text). Anything else is a ``DataError`` naming the row and field."""
    if not isinstance(row, dict):
        raise DataError(source, index, "row", "is not a record")
    prompt = row.get("prompt")
    if not isinstance(prompt, list) or not prompt:
        raise DataError(source, index, "prompt", "must be a non-empty list of {role, content} messages")
    messages = []
    for m in prompt:
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            raise DataError(source, index, "prompt", "holds %r, not a {role, content} message" % (m,))
        messages.append({"role": m["role"], "content": m["content"]})
    spec = row.get("reward_model")
    if not isinstance(spec, dict) or spec.get("style") != "rule":
        raise DataError(source, index, "reward_model", 'must be {"style": "rule", "ground_truth": ...}')
    truth = spec.get("ground_truth")
    if isinstance(truth, (int, float)) and not isinstance(truth, bool) and math.isfinite(truth):
        truth = _number_text(truth)  # a parquet column of numbers, as compute_score reads one
    if not isinstance(truth, str) or truth.strip() == "":
        raise DataError(source, index, "reward_model.ground_truth", "must be a non-empty string or a finite number")
    return messages, truth


def reward(reply, ground_truth):
    """The reward of a reply (the model's text): 1.0 when its last ``\\boxed{}`` is the ground truth, else 0.0."""
    return compute_score(None, reply or "", ground_truth)


_classes = {}


def _build():
    """The taskset's classes on verifiers' v1 API (imported here, on first use)."""
    import verifiers.v1 as vf

    class RlvrBoxedData(vf.TaskData):
        answer: str
        """The ground truth the ``\\boxed{}`` verifier compares the reply's answer with."""

    class RlvrBoxedTask(vf.Task[RlvrBoxedData]):
        @vf.stop
        async def single_turn(self, trace: vf.Trace) -> bool:
            # rlvr's tasks are one prompt and one answer: no second turn.
            return trace.num_turns >= 1

        @vf.reward(weight=1.0)
        async def boxed(self, trace: vf.Trace) -> float:
            return reward(trace.last_reply, self.data.answer)

    class RlvrBoxedConfig(vf.TasksetConfig):
        data_file: str = ""
        """A parquet file ``rlvr export-data`` wrote (train.parquet, or test.parquet for evaluation)."""

    class RlvrBoxedTaskset(vf.Taskset[RlvrBoxedTask, RlvrBoxedConfig]):
        def load(self):
            path = self.config.data_file
            if not path:
                raise ValueError("taskset %s needs data_file: a parquet file of rlvr export-data" % TASKSET_ID)
            tasks = []
            for i, row in enumerate(read_rows(path)):
                messages, truth = task_of_row(row, i, path)
                tasks.append(RlvrBoxedTask(RlvrBoxedData(idx=i, prompt=messages, answer=truth), self.config.task))
            return tasks

    for cls in (RlvrBoxedData, RlvrBoxedTask, RlvrBoxedConfig, RlvrBoxedTaskset):
        # Module-level names, so that pickle and pydantic find them where they are looked up.
        cls.__module__, cls.__qualname__ = __name__, cls.__name__
        _classes[cls.__name__] = cls


def __getattr__(name):
    if name in ("RlvrBoxedData", "RlvrBoxedTask", "RlvrBoxedConfig", "RlvrBoxedTaskset"):
        if not _classes:
            _build()
        globals().update(_classes)
        return _classes[name]
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
