"""The TRL integration's config: TRL's `GRPOConfig` plus grposcope's fields, each meaning what it means in
grposcope's own `GRPOConfig` (docs/usage.md), with the same name and default:

- the run-wide ones (`advantage_estimator`, `use_avspo`, `sampler`, `success_threshold`, `acr_ema_lambda`,
  `kl_bound`, ...: components/fields.py's TRLRunWideOptions), with grposcope's config's docs;
- every option an advantage estimator or a sampler declares where it is registered (`acr_threshold_init`,
  `virtual_sample_alpha`, `all_wrong_max_share`, `max_gen_batches`, ...). TRL's own `scale_rewards` is grpo's
  option. The policy loss stays TRL's (`loss_type`, `epsilon`, `epsilon_high`, ...).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import TypeVar

from trl import GRPOConfig as TRLGRPOConfig

from ..components.build import check
from ..components.families import estimator_with_avspo
from ..components.field_docs import field_docs
from ..components.fields import TRLEstimatorOptions, TRLRunWideOptions, TRLSamplerOptions
from ..components.options import check_fields, declared, unread_component_option
from ..components.plugins import KWARGS, read_kwargs
from ..components.ranges import check_options
from ..core.advantages import ESTIMATORS
from ..sampling import SAMPLERS, pool_pairing

FAMILIES_IN_TRL = ("advantage_estimator", "sampler")
# What runs in TRL is declared where each entry is registered (hosts=...)
SAMPLERS_IN_TRL = tuple(SAMPLERS.names_in("trl"))


RUN_WIDE = tuple(f.name for f in dataclasses.fields(TRLRunWideOptions))  # grposcope's run-wide fields here
ConfigClass = TypeVar("ConfigClass", bound=type)


def _with_help(cls: ConfigClass) -> ConfigClass:
    """TRL's parser (HfArgumentParser) shows `metadata["help"]`: give grposcope's fields theirs, the docstrings
    of components/fields.py (rendered from grposcope's config and the components' registrations). Typed as
    returning the class it is given, so that type checkers still see GRPOConfig's fields."""
    docs = {**field_docs(TRLRunWideOptions), **{name: option.doc for name, option in declared().items()}}
    for f in dataclasses.fields(cls):
        if f.name in docs and not f.metadata:
            f.metadata = {"help": " ".join(docs[f.name].split())}  # type: ignore[assignment]  # typeshed: read-only
    return cls


@_with_help
@dataclasses.dataclass
class GRPOConfig(TRLSamplerOptions, TRLEstimatorOptions, TRLRunWideOptions, TRLGRPOConfig):
    """TRL's `GRPOConfig` with grposcope's collapse fields (this module's docstring; docs/integrations.md).

    >>> GRPOConfig(output_dir="out", num_generations=8, use_avspo=True, acr_threshold_init=0.5,
    ...            virtual_sample_alpha=0.5, sampler="dynamic", max_gen_batches=3)
    """

    def __post_init__(self) -> None:
        check_fields(self, "trl")  # components/fields.py rendered after the last declaration changed
        super().__post_init__()
        self.advantage_estimator = estimator_with_avspo(self.advantage_estimator, self.use_avspo)
        ESTIMATORS.get(self.advantage_estimator)  # an unknown name fails with the known ones
        SAMPLERS.get(self.sampler)
        if "trl" not in ESTIMATORS.hosts(self.advantage_estimator):
            raise ValueError(f"advantage_estimator={self.advantage_estimator!r} does not run in TRL; in TRL use one "
                             f"of {', '.join(ESTIMATORS.names_in('trl'))}")
        if "trl" not in SAMPLERS.hosts(self.sampler):
            raise ValueError(f"sampler={self.sampler!r} does not run in TRL; in TRL use one of "
                             f"{', '.join(SAMPLERS_IN_TRL)}, or run it in grposcope's own trainer (grposcope train "
                             f"--sampler {self.sampler})")
        if self.sampler == "reinforce_ada" and self.round_size % self.num_generations:  # type: ignore[operator]
            # TRL generates, scores and logs in blocks of num_generations completions of one prompt (vLLM's
            # server mode asks for num_generations per prompt), so a round must be whole blocks
            raise ValueError(f"round_size={self.round_size} is not a multiple of num_generations="
                             f"{self.num_generations}: in TRL each round draws whole blocks of num_generations "
                             f"completions per prompt; set round_size to {self.num_generations} or a multiple")
        pairing = pool_pairing(self.sampler, self.advantage_estimator)  # raises for pool without pools
        if self.multi_objective_aggregation != "sum_then_normalize":
            raise ValueError(
                f"multi_objective_aggregation={self.multi_objective_aggregation!r}: grposcope's estimators take one "
                "reward per completion, TRL's weighted sum of the reward functions; set "
                "multi_objective_aggregation='sum_then_normalize' (TRL's default)")
        # grposcope's own ranges for its fields (TRL checks its own): the one table, as in grposcope's config
        check_options({name: getattr(self, name) for name in (*RUN_WIDE, *declared()) if hasattr(self, name)})
        for family in FAMILIES_IN_TRL:  # a plug-in's keyword arguments, from JSON on TRL's command line
            setattr(self, KWARGS[family], read_kwargs(KWARGS[family], getattr(self, KWARGS[family])))
        # a bad option fails here, before any model is loaded; the instances are kept for the run
        check(self, [(family, getattr(self, family)) for family in FAMILIES_IN_TRL])
        for note in self.unused_options() + ([pairing] if pairing else []):
            warnings.warn(note, stacklevel=3)

    def unused_options(self) -> list[str]:
        """An estimator's or sampler's option set away from its default that the chosen one does not read."""
        options = declared()
        changed = [name for name, option in options.items()
                   if hasattr(self, name) and getattr(self, name) != option.default]
        changed += [KWARGS[family] for family in FAMILIES_IN_TRL]
        return [note for name in changed if (note := unread_component_option(self, name, options))]
