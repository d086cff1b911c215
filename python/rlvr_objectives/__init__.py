"""rlvr_objectives: the objectives of rlvr-wgpu (src/objectives/) in PyTorch, for verl and prime-rl.

Pure PyTorch: importing this package needs neither engine. ``verl_plugin`` registers the losses and RCC with verl
when verl is importable; ``prime_rl`` holds the custom losses prime-rl imports by path. See python/README.md.

Written against verl at b178a3cd56f58b2d502255daba591e92833930a7 (v0.7.0-125, 2026-01-29; policy losses return
``(loss, metrics)``, the 2-tuple form since verl PR #4062) and prime-rl at
559b44772e471d1538537b8805cc77f3824a5e64 (v0.8.1.dev67, 2026-08-21; ``[trainer.loss] type = "custom"``).
"""

from .advantages import (PAPER_ADVANTAGES, RCC_ADVANTAGES, TRL_ADVANTAGES, VERL_ADVANTAGES, group_advantages,
                         rcc_advantages, rcc_baseline, sequence_deltas)
from .batch import LOG_RATIO_BOUND, check_batch
from .boxed import compute_score, extract_boxed, normalize_number, verify_boxed, verify_boxed_number
from .config import DEFAULTS, BatchError, ConfigError, parse_config
from .losses import LOSSES, USES_ADVANTAGES, RolloutBatch, compute_loss, conspo_margin, scheduled_margin

__all__ = [
    "BatchError", "ConfigError", "DEFAULTS", "LOG_RATIO_BOUND", "LOSSES", "PAPER_ADVANTAGES", "RCC_ADVANTAGES",
    "RolloutBatch", "TRL_ADVANTAGES", "USES_ADVANTAGES", "VERL_ADVANTAGES", "check_batch", "compute_loss",
    "compute_score", "conspo_margin", "extract_boxed", "group_advantages", "normalize_number", "parse_config",
    "rcc_advantages", "rcc_baseline", "scheduled_margin", "sequence_deltas", "verify_boxed", "verify_boxed_number",
]

VERL_COMMIT = "b178a3cd56f58b2d502255daba591e92833930a7"
PRIME_RL_COMMIT = "559b44772e471d1538537b8805cc77f3824a5e64"
