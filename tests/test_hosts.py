"""Which trainer runs what is declared where each entry is registered (`hosts=`), and every host reads it
from there: TRL's config, verl's estimator names, the forecast's samplers."""

from __future__ import annotations

import pytest

from grposcope.core.advantages import ESTIMATORS
from grposcope.core.losses import POLICY_LOSSES
from grposcope.core.registry import HOSTS, Registry
from grposcope.reports.forecast import all_samplers
from grposcope.sampling import SAMPLERS


def test_a_registration_names_its_hosts_and_an_unknown_host_is_refused():
    registry = Registry("thing")
    registry.register("a", hosts=("grposcope", "verl"))(lambda: None)
    registry.register("b")(lambda: None)
    assert registry.hosts("a") == ("grposcope", "verl") and registry.hosts("b") == ("grposcope",)
    assert registry.names_in("verl") == ["a"] and registry.names_in("grposcope") == ["a", "b"]
    with pytest.raises(ValueError, match="unknown host\\(s\\) slurm; known: grposcope, trl, verl"):
        registry.register("c", hosts=("slurm",))(lambda: None)
    with pytest.raises(ValueError, match="unknown host 'slurm'"):
        registry.names_in("slurm")


def test_every_entry_runs_in_grposcopes_own_trainer():
    for registry in (ESTIMATORS, SAMPLERS, POLICY_LOSSES):
        for name in registry.names():
            assert "grposcope" in registry.hosts(name) and set(registry.hosts(name)) <= set(HOSTS)


def test_the_forecast_costs_every_registered_sampler_in_registration_order():
    in_order = ["fixed", "dynamic", "reinforce_ada", "greso", "knapsack", "budgeted"]
    assert all_samplers() == SAMPLERS.names_in("grposcope") == in_order


def test_trl_takes_what_is_declared_for_it():
    trl_config = pytest.importorskip("grposcope.integrations.trl_config")
    assert trl_config.SAMPLERS_IN_TRL == tuple(SAMPLERS.names_in("trl"))
    not_in_trl = [name for name in SAMPLERS.names() if "trl" not in SAMPLERS.hosts(name)]
    for name in not_in_trl:
        with pytest.raises(ValueError, match=f"sampler={name!r} does not run in TRL; in TRL use one of"):
            trl_config.GRPOConfig(output_dir="unused", sampler=name, report_to="none", use_cpu=True, bf16=False)
