"""RCC in verl: hands the ``rlvr_rcc`` estimator the log-probs verl does not pass estimators.

verl's ``compute_advantage`` (verl/trainer/ppo/ray_trainer.py at b178a3cd) calls a registered estimator with the
rewards, the response mask, the group ids and the config only; RCC's baseline needs each rollout's sequence delta
log pi_old - log pi_ref. Importing this module (``VERL_USE_EXTERNAL_MODULES=rlvr_objectives.verl_plugin,
rlvr_objectives.verl_rcc``) wraps that function: for ``algorithm.adv_estimator=rlvr_rcc`` it reads
``old_log_probs`` and ``ref_log_prob`` from the batch (a reference policy must exist: ``use_kl_loss=True``, with
``kl_loss_coef=0`` when the run has no KL term) and calls ``verl_plugin.compute_rcc_advantage``; every other
estimator goes to verl's function unchanged. It imports verl's trainer module, so it is loaded only on request.
Not run against a live verl here (verl cannot be installed on this machine): its estimator is tested directly.
"""

from .verl_plugin import compute_rcc_advantage


def install(ray_trainer=None):
    """Wrap ``ray_trainer.compute_advantage`` (once). Returns the wrapper."""
    if ray_trainer is None:
        from verl.trainer.ppo import ray_trainer
    original = ray_trainer.compute_advantage
    if getattr(original, "rlvr_rcc", False):
        return original

    def compute_advantage(data, adv_estimator, *args, **kwargs):
        if getattr(adv_estimator, "value", adv_estimator) != "rlvr_rcc":
            return original(data, adv_estimator, *args, **kwargs)
        if "response_mask" not in data.batch.keys():
            data.batch["response_mask"] = ray_trainer.compute_response_mask(data)
        advantages, returns = compute_rcc_advantage(
            token_level_rewards=data.batch["token_level_rewards"],
            response_mask=data.batch["response_mask"],
            index=data.non_tensor_batch["uid"],
            old_log_probs=data.batch["old_log_probs"],
            ref_log_prob=data.batch["ref_log_prob"],
        )
        data.batch["advantages"] = advantages
        data.batch["returns"] = returns
        return data

    compute_advantage.rlvr_rcc = True
    ray_trainer.compute_advantage = compute_advantage
    return compute_advantage


def _install_if_verl():
    try:
        from verl.trainer.ppo import ray_trainer
    except ImportError:
        return None
    return install(ray_trainer)


INSTALLED = _install_if_verl()
