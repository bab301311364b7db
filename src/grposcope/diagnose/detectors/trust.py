"""What the estimates of the policy's move say about themselves: `negative_kl` and `clip_near_one`.

A KL divergence is never negative and a trust region clips a share of tokens, not all of them. A log that says
otherwise is measuring something else than its name says (an estimator with too few samples, a sign flipped, a
ratio taken against the wrong log-probabilities), and every rule built on that figure inherits the error.
"""

from __future__ import annotations

import numpy as np

from ...runs import catalogue as c
from ..findings import PPO, SUMMARIZE, Fix
from .base import Detector, register, spans
from .exploration import clipped

# negative_kl: the logged KL below -NEGATIVE_TOL on a share of the logged steps: NEGATIVE_WARNING (or one value below
# -NEGATIVE_LARGE nats) a warning, NEGATIVE_CRITICAL critical (negative more often than not: a bias, not noise);
# fewer: info (the k1 estimator's sign noise around a KL near 0)
NEGATIVE_TOL = 1e-6
NEGATIVE_WARNING, NEGATIVE_CRITICAL = 0.20, 0.50
NEGATIVE_LARGE = 0.1


@register
class NegativeKL(Detector):
    name = "negative_kl"
    summary = "the logged KL estimate is negative: a divergence cannot be, so the estimator or its sign is off"
    needs = ((c.KL,),)
    fix = Fix(
        grposcope="kl_estimator='k3' (non-negative, low variance) rather than the plain log-ratio; check that the "
        "KL is log pi - log pi_ref in that order",
        trl="TRL's per-token KL is k3 (never negative): a negative kl in a TRL log is another quantity; check a "
        "custom loss's sign",
        verl="actor_rollout_ref.actor.kl_loss_type=low_var_kl (k3) instead of kl (k1); algorithm.kl_ctrl for the "
        "in-reward penalty",
    )
    refs = (SUMMARIZE,)

    def detect(self, view):
        x, k = view[c.KL]
        negative = k < -NEGATIVE_TOL
        n = int(negative.sum())
        if n == 0:
            return []
        share = n / len(k)
        lowest = float(k.min())
        severity = ("critical" if share >= NEGATIVE_CRITICAL else
                    "warning" if share >= NEGATIVE_WARNING or lowest <= -NEGATIVE_LARGE else "info")
        evidence = [f"{c.KL} is negative on {n} of {len(k)} logged steps ({share:.0%}), down to {lowest:.3g}: steps "
                    f"{spans(x[negative])}",
                    f"its median over the run is {float(np.median(k)):.3g}"]
        if severity == "critical":
            evidence.append("negative more often than not: a bias, not the sampling noise of an unbiased estimator; a "
                            "KL penalty on it pays the policy for moving away from the reference")
        else:
            evidence.append("the plain log-ratio estimator (k1) is unbiased but its batch mean goes below 0 when the "
                            "true KL is small; a non-negative estimator (k3) avoids it")
        return [self.finding(severity, x[negative][0], f"the KL estimate is negative on {share:.0%} of the logged "
                             "steps", evidence, share=share, lowest=lowest)]


# clip_near_one: the clipped share at or above NEAR_ONE on NEAR_ONE_LEAST logged steps and NEAR_ONE_SHARE of them
# (critical); on fewer: warning
NEAR_ONE = 0.9
NEAR_ONE_LEAST, NEAR_ONE_SHARE = 3, 0.10


@register
class ClipNearOne(Detector):
    name = "clip_near_one"
    summary = "nearly every token clipped: the ratio is taken against log-probabilities the policy never had"
    needs = ((c.CLIP, c.CLIP_LOW, c.CLIP_HIGH),)
    fix = Fix(
        grposcope="check that the old log-probabilities are the sampling policy's (recomputed by the trainer, same "
        "precision and chat template); fewer updates per generation (num_iterations=1)",
        trl="num_iterations=1; with vLLM, vllm_importance_sampling_correction=True and the same dtype for both "
        "engines",
        verl="recompute old_log_prob with the actor (not the rollout engine's); actor_rollout_ref.actor.ppo_epochs=1; "
        "check the rollout and actor dtypes agree",
    )
    refs = (PPO,)

    def detect(self, view):
        x, total = clipped(view)
        near = total >= NEAR_ONE
        n = int(near.sum())
        if n == 0:
            return []
        share = n / len(total)
        severity = "critical" if n >= NEAR_ONE_LEAST and share >= NEAR_ONE_SHARE else "warning"
        evidence = [f"the clipped share is {NEAR_ONE:g} or more on {n} of {len(total)} logged steps ({share:.0%}), "
                    f"up to {float(total.max()):.3g}: steps {spans(x[near])}",
                    "a trust region clips the tokens whose ratio moved most, a few percent with one update per "
                    "generation; all of them means the ratio is off for every token: old log-probabilities from "
                    "another engine, precision or template, or stale ones",
                    "a clipped token gives no gradient: such a step trains on nothing (or on the clip's edge)"]
        return [self.finding(severity, x[near][0], f"nearly every token is clipped on {n} logged steps", evidence,
                             share=share, steps=n)]
