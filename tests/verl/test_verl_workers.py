"""How grposcope.integrations.verl gets imported where verl runs the estimator, and its state across a resume.

verl 0.9.1 computes advantages in its TaskRunner, a Ray actor: an import in the launching script registers
nothing there. Each process that imports verl runs verl/__init__.py, which imports the modules named in
VERL_USE_EXTERNAL_MODULES and the entry points of the group "verl.plugins"; the v1 trainer also imports the class
named in trainer.checkpoint_callback_class. Runs in .venv-verl (scripts/test_verl.sh).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos", reason="needs verl 0.9.1: bash scripts/test_verl.sh")

from omegaconf import OmegaConf  # noqa: E402
from verl.trainer.ppo.checkpoint_callback import build_checkpoint_callback  # noqa: E402
from verl_batches import make_batch, verl_advantages  # noqa: E402

from grposcope.integrations import verl as plugin  # noqa: E402

MODULE = "grposcope.integrations.verl"
ALL = "['avspo', 'grposcope_grpo', 'grposcope_pool']"
PROBE = ("from verl.trainer.ppo import core_algos\n"
         f"print(sorted(n for n in {ALL} if n in core_algos.ADV_ESTIMATOR_REGISTRY))")


def run(code: str, **env: str) -> str:
    """stdout of `code` in a fresh interpreter; VERL_USE_EXTERNAL_PLUGINS=none unless given, so that an entry point
    grposcope's own metadata may declare does not blur what each test shows."""
    full_env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "none", **env}
    full_env.pop("VERL_USE_EXTERNAL_MODULES", None) if "VERL_USE_EXTERNAL_MODULES" not in env else None
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]


def test_importing_verl_imports_the_module_named_in_verl_use_external_modules():
    assert run(PROBE) == "[]"
    assert run(PROBE, VERL_USE_EXTERNAL_MODULES=MODULE) == ALL


def test_a_verl_plugins_entry_point_is_loaded_by_import_verl(tmp_path):
    # what `[project.entry-points."verl.plugins"] grposcope = "grposcope.integrations.verl"` in pyproject.toml
    # installs: a distribution whose entry_points.txt names the module
    dist = tmp_path / "grposcope_verl_probe-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: grposcope-verl-probe\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(f"[verl.plugins]\ngrposcope = {MODULE}\n")
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    assert run(PROBE, PYTHONPATH=path, VERL_USE_EXTERNAL_PLUGINS="auto") == ALL
    assert run(PROBE, PYTHONPATH=path, VERL_USE_EXTERNAL_PLUGINS="none") == "[]"


def test_in_a_ray_worker_only_the_environment_variable_registers():
    code = textwrap.dedent(f"""
        import ray
        import {MODULE}  # the launching script: registers in this process only

        @ray.remote
        def registered():
            from verl.trainer.ppo import core_algos
            return "avspo" in core_algos.ADV_ESTIMATOR_REGISTRY

        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
        env = {{"env_vars": {{"VERL_USE_EXTERNAL_MODULES": "{MODULE}"}}}}  # as +ray_kwargs.ray_init.runtime_env
        print([ray.get(registered.remote()), ray.get(registered.options(runtime_env=env).remote())])
        ray.shutdown()
    """)
    assert run(code) == "[False, True]"


def test_the_checkpoint_callback_class_imports_the_module():
    code = ("from omegaconf import OmegaConf\n"
            "from verl.trainer.ppo.checkpoint_callback import build_checkpoint_callback\n"
            f"build_checkpoint_callback(OmegaConf.create({{'trainer': {{'checkpoint_callback_class': "
            f"'{MODULE}.GrposcopeCheckpointCallback', 'resume_mode': 'disable'}}}}))\n" + PROBE)
    assert run(code) == ALL


def avspo_step(rewards: list[list[float]]) -> torch.Tensor:
    uids = [f"g{i}" for i, group in enumerate(rewards) for _ in group]
    return verl_advantages(make_batch([r for group in rewards for r in group], uids), "avspo")


def test_avspo_state_survives_a_verl_checkpoint_and_resume(tmp_path):
    plugin.reset()
    config = OmegaConf.create({"trainer": {
        "checkpoint_callback_class": f"{MODULE}.GrposcopeCheckpointCallback",
        "resume_mode": "auto", "default_local_dir": str(tmp_path)}})
    callback = build_checkpoint_callback(config)  # verl's builder; nothing to resume yet
    collapsed, half = [[1.0] * 4, [1.0] * 4], [[1.0] * 4, [1.0, 0.0, 1.0, 0.0]]
    avspo_step(collapsed)
    avspo_step(collapsed)  # ACR 1, 1: the signal (EMA, lambda 0.9) is 1.0
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("2")  # verl writes it, then calls on_save
    callback.on_save(trainer=None, global_step=2, checkpoint_dir=str(tmp_path / "global_step_2"))
    # step 3, ACR 0.5: signal 0.9 * 1.0 + 0.1 * 0.5 = 0.95 > tau 0.5, so the all-correct group is augmented
    continued, state = avspo_step(half), plugin.state_dict()["avspo"]
    assert torch.count_nonzero(continued[:4]) == 4

    plugin.reset()  # a new TaskRunner: without the saved state the signal is 0.5, not above tau, and group 0 gets 0
    assert torch.count_nonzero(avspo_step(half)[:4]) == 0

    plugin.reset()
    build_checkpoint_callback(config)  # resumes from global_step_2
    resumed = avspo_step(half)
    torch.testing.assert_close(resumed, continued, atol=0, rtol=0)
    assert plugin.state_dict()["avspo"]["acr_ema"] == state["acr_ema"] == pytest.approx(0.95)
    plugin.reset()
