"""A plug-in from outside grposcope, named by dotted path, in verl 0.9.1: docs/architecture.md's worked example as
`algorithm.adv_estimator`, through verl's own config and compute_advantage; a sampler plug-in's options."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

core_algos = pytest.importorskip("verl.trainer.ppo.core_algos", reason="needs verl 0.9.1: bash scripts/test_verl.sh")

from verl_batches import make_batch, verl_advantages  # noqa: E402

from grposcope.core.advantages import ESTIMATORS  # noqa: E402
from grposcope.integrations import verl as plugin  # noqa: E402
from grposcope.integrations import verl_sampling  # noqa: E402
from grposcope.sampling import SAMPLERS  # noqa: E402

DOCS = Path(__file__).parents[2] / "docs" / "architecture.md"
RANGE = "mypkg.estimators:RangeNormalised"
SAMPLER = '''
from grposcope.sampling.fixed import Fixed


class EveryOther(Fixed):
    def __init__(self, offset: int = 0, success_threshold: float = 0.5, seed: int = 0) -> None:
        super().__init__(success_threshold=success_threshold, seed=seed)
        self.offset = offset
'''


@pytest.fixture
def mypkg(tmp_path, monkeypatch):
    text = DOCS.read_text()
    example = text[text.index("<!-- plugin-example: mypkg/estimators.py -->"):].split("```python\n", 1)[1]
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "estimators.py").write_text(example.split("```", 1)[0])
    (tmp_path / "mypkg" / "samplers.py").write_text(SAMPLER)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugin.reset()
    yield tmp_path
    plugin.reset()
    core_algos.ADV_ESTIMATOR_REGISTRY.pop(RANGE, None)
    plugin.NAMES.pop(RANGE, None)
    for registry in (ESTIMATORS, SAMPLERS):
        for name in [n for n in list(registry._entries) if n.startswith("mypkg.")]:
            registry.unload(name)
    for module in [m for m in sys.modules if m == "mypkg" or m.startswith("mypkg.")]:
        del sys.modules[module]


def composed(*overrides):
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose("ppo_trainer", overrides=list(overrides))


def test_the_docs_example_is_verls_advantage_estimator_by_its_dotted_path(mypkg):
    cfg = composed(f'algorithm.adv_estimator="{RANGE}"', "+algorithm.grposcope.advantage_estimator_kwargs.eps=0.001",
                   "+algorithm.grposcope.success_threshold=1.0")
    assert RANGE not in core_algos.ADV_ESTIMATOR_REGISTRY and "mypkg" not in sys.modules  # named, not yet looked up
    # group a: [1, 0, 0, 1] -> mean 0.5, range 1: A = +-0.5 / 1.001 = +-0.4995005; group b: [1, 1, 1, 1] -> 0
    adv = verl_advantages(make_batch([1, 1, 0, 1, 1, 0, 1, 1], ["a", "b", "a", "b", "b", "a", "b", "a"]),
                          cfg.algorithm.adv_estimator, cfg.algorithm)
    expected = torch.tensor([0.4995005, 0, -0.4995005, 0, 0, -0.4995005, 0, 0.4995005])
    torch.testing.assert_close(adv, expected, atol=1e-6, rtol=0)
    estimator = core_algos.get_adv_estimator_fn(RANGE).slot.estimator
    assert (estimator.eps, estimator.success_threshold) == (0.001, 1.0)  # its mapping; the run-wide field
    assert plugin.latest_metrics()["range/solved"] == 0.75  # 6 of 8 rewards >= 1.0
    assert plugin.uses_grposcope(cfg) and RANGE in plugin.state_dict()  # checkpointed with grposcope's state


def test_a_plugins_unknown_option_fails_with_its_signature(mypkg):
    from omegaconf import OmegaConf

    algorithm = OmegaConf.create({"adv_estimator": RANGE, "grposcope": {"advantage_estimator_kwargs": {"epsilon": 1}}})
    with pytest.raises(ValueError, match=r"algorithm.grposcope.advantage_estimator_kwargs: advantage estimator "
                                         r"'mypkg.estimators:RangeNormalised' takes no 'epsilon'; it takes \(eps"):
        verl_advantages(make_batch([1, 0, 1, 0], ["a"] * 4), RANGE, algorithm)
    algorithm = OmegaConf.create({"adv_estimator": RANGE, "grposcope": {"eps": 0.1}})
    with pytest.raises(ValueError, match="algorithm.grposcope.eps is not an option of advantage estimator"):
        verl_advantages(make_batch([1, 0, 1, 0], ["a"] * 4), RANGE, algorithm)


def test_a_sampler_plugin_takes_its_mapping_and_the_run_wide_fields_it_names(mypkg):
    cfg = composed("+algorithm.grposcope.sampler=mypkg.samplers:EveryOther",
                   "+algorithm.grposcope.sampler_kwargs.offset=1", "+algorithm.grposcope.seed=3")
    assert verl_sampling.sampler_options(cfg.algorithm) == (
        "mypkg.samplers:EveryOther", {"offset": 1, "success_threshold": 0.5, "seed": 3})
    sampler = verl_sampling.make_sampler(*verl_sampling.sampler_options(cfg.algorithm))
    assert type(sampler).__name__ == "EveryOther" and sampler.offset == 1
