"""The verifiers taskset ``rlvr-boxed`` (prime-rl: ``[orchestrator.train.source.env.taskset] id = "rlvr-boxed"``).

verifiers imports a taskset by its id as a top-level module (``rlvr-boxed`` -> ``rlvr_boxed``) and takes the one
``Taskset`` subclass its ``__all__`` exports; the taskset is ``rlvr_objectives.environment.RlvrBoxedTaskset``, built
on first use (verifiers is imported then, not before).
"""

from rlvr_objectives import environment as _environment

__all__ = ["RlvrBoxedTaskset"]


def __getattr__(name):
    return getattr(_environment, name)
