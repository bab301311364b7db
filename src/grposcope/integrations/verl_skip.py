"""No optimizer step without signal inside verl 0.9.1's FSDP actor: `algorithm.grposcope.skip_no_signal_steps`.

verl steps the actor in its workers (Ray actors), in `FSDPEngine.optimizer_step` (verl/workers/engine/fsdp/
transformer_impl.py): clip the gradient, then `optimizer.step()` unless the norm is not finite. A plugin reaches
it because every process that imports verl loads the "verl.plugins" entry points, the workers included; with the
variable set there, importing grposcope.integrations.verl wraps that method so that, for the duration of one
call, the optimizer's `step` first asks whether any gradient element is non-zero on any process (one all-reduce)
and does nothing when none is. The weights, AdamW's moments and its step count stay as they were; verl steps its
learning-rate schedule separately, so the schedule follows the step count; the step logs `actor/grad_norm` 0.

The workers read the decision from GRPOSCOPE_SKIP_NO_SIGNAL_STEPS ("1" or "0"), which the TaskRunner sets from
the config key before verl builds them and passes into each worker group's environment (verl.forward_skip):
on by default in a run that uses a grposcope estimator or sampler, as in grposcope's own trainer and its TRL
integration. A run that uses neither keeps stock verl's behaviour, because the entry point loads into every verl
run on a machine where grposcope is installed, whichever estimator that run uses: changing how those runs
update must be asked for (the key, or the variable through Ray's runtime environment,
`+ray_kwargs.ray_init.runtime_env.env_vars.GRPOSCOPE_SKIP_NO_SIGNAL_STEPS='"1"'`).

Not covered: the Megatron engine (its optimizer returns whether it updated and counts zeros itself), and
engines that do not inherit FSDPEngine.optimizer_step (torchtitan, veomni, automodel); there the variable changes
nothing.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any, Callable, Iterable

import torch

ENV = "GRPOSCOPE_SKIP_NO_SIGNAL_STEPS"
logger = logging.getLogger("grposcope")
skipped_steps = 0  # optimizer steps this process skipped


def enabled() -> bool:
    return os.environ.get(ENV, "0") == "1"


def gradient_is_zero(parameters: Iterable[torch.nn.Parameter]) -> bool:
    """Whether every gradient element of `parameters` is exactly 0 on every process: each process reads its own
    shards (FSDP's DTensor gradients through `to_local`), then one all-reduce (MAX) when torch.distributed is
    initialised, so that every process decides alike."""
    nonzero, device = 0.0, torch.device("cpu")
    for p in parameters:
        grad = p.grad
        if grad is None:
            continue
        grad = grad.to_local() if hasattr(grad, "to_local") else grad
        device = grad.device
        if bool(grad.ne(0).any()):
            nonzero = 1.0
            break
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        if torch.distributed.get_backend() == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        flag = torch.tensor([nonzero], device=device)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        nonzero = float(flag.item())
    return nonzero == 0.0


def wrap_optimizer_step(original: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`original` (an engine's optimizer_step(self)) with the optimizer's step skipped when no gradient is
    non-zero on any process. The engine reads `self.module` and `self.optimizer`, as verl's FSDPEngine does."""

    @functools.wraps(original)
    def optimizer_step(self: Any) -> Any:
        if not enabled():
            return original(self)
        optimizer = self.optimizer
        had_own = "step" in vars(optimizer)  # torch's LR schedulers wrap `step` on the instance
        step = optimizer.step

        def step_with_signal(*args: Any, **kwargs: Any) -> Any:
            global skipped_steps
            if gradient_is_zero(self.module.parameters()):
                skipped_steps += 1
                logger.info("grposcope: optimizer step skipped, every gradient is 0 (%d so far)", skipped_steps)
                return None
            return step(*args, **kwargs)

        optimizer.step = step_with_signal
        try:
            return original(self)
        finally:
            if had_own:
                optimizer.step = step
            else:
                del optimizer.step

    optimizer_step._grposcope = True  # type: ignore[attr-defined]
    return optimizer_step


def install() -> bool:
    """Wraps verl's FSDPEngine.optimizer_step once; False when that engine cannot be imported here."""
    try:
        from verl.workers.engine.fsdp.transformer_impl import FSDPEngine
    except ImportError:
        return False
    if not getattr(FSDPEngine.optimizer_step, "_grposcope", False):
        FSDPEngine.optimizer_step = wrap_optimizer_step(FSDPEngine.optimizer_step)
    return True
