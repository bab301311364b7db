"""docs/integrations.md's table of what runs where: every registered estimator, sampler and policy loss against
grposcope's own trainer, TRL and verl, read from each entry's `hosts` (core.registry), so that the table cannot
drift from the code; a test keeps the embedded copy in sync.

    python -m grposcope.integrations.hosts_doc   # to look at; `python -m grposcope.cli.render` embeds it
"""

from __future__ import annotations

BEGIN, END = "<!-- hosts-table:begin -->", "<!-- hosts-table:end -->"
COLUMNS = ("grposcope", "trl", "verl")
HEADER = ("kind", "name", "grposcope train", "TRL (`integrations.trl`)", "verl (`integrations.verl`)")
# What a host does instead when an entry does not run in it: by (kind, host, name), else by (kind, host)
INSTEAD = {
    ("advantage estimator", "verl"): "no: verl's own estimators (`algorithm.adv_estimator`: grpo, rloo, ...)",
    ("sampler", "verl", "dynamic"): "verl's own DAPO filter (`algorithm.filter_groups`)",
    ("sampler", "trl"): "not yet: `grposcope train --sampler {name}`",
    ("sampler", "verl"): "not yet: `grposcope train --sampler {name}`",
    ("policy loss", "trl"): "TRL's own loss (`loss_type`, `epsilon`, `epsilon_high`, `importance_sampling_level`)",
    ("policy loss", "verl"): "verl's own (`actor_rollout_ref.actor.policy_loss.loss_mode`)",
}
# The metric families, written here: they are the integrations' code, not registrations
METRICS = (
    ("`collapse/acr`, `acr_all_correct`, `acr_all_wrong`", "yes", "yes", "yes: the estimators, any sampler, or "
     "the v1 replay buffer of `verl_metrics`"),
    ("`collapse/acr_ema`, `acr_cumulative`, `acr_100`, `volatility`", "yes", "yes",
     "yes: any sampler (`+algorithm.grposcope.sampler=fixed` keeps verl's draw), or the v1 replay buffer"),
    ("`collapse/acr_post`", "yes", "yes", "yes: the estimators"),
    ("`alarm/stagnation`", "yes", "yes", "yes: any sampler, or the v1 replay buffer"),
    ("`alarm/entropy_collapse`, `alarm/kl_drift`, `alarm/no_signal`", "yes", "yes",
     "no: the entropy, KL and advantages stay in verl's workers; verl logs `actor/entropy` and its KL itself"),
    ("`sampler/*`", "yes", "yes", "yes: any sampler, both trainers"),
    ("`avspo/*`", "yes", "yes", "yes: in verl's logged metrics, v1 trainer (always) and legacy trainer (with a "
     "sampler)"),
)


def hosts_table() -> str:
    from ..core.advantages import ESTIMATORS
    from ..core.losses import POLICY_LOSSES
    from ..sampling import SAMPLERS
    from .verl_groups import verl_name

    rows = ["| " + " | ".join(HEADER) + " |", "|" + "|".join("---" for _ in HEADER) + "|"]
    for registry in (ESTIMATORS, SAMPLERS, POLICY_LOSSES):
        for name in registry.names_in("grposcope"):
            cells = ["yes" if host in registry.hosts(name) else _instead(registry.kind, host, name)
                     for host in COLUMNS]
            if "verl" in registry.hosts(name):
                cells[2] = (f"yes: `algorithm.adv_estimator={verl_name(name)}`" if registry is ESTIMATORS else
                            f"yes: `+algorithm.grposcope.sampler={name}` (both trainers; v1 in sync mode)")
            rows.append(f"| {registry.kind} | `{name}` | " + " | ".join(cells) + " |")
    rows += [f"| metrics | {family} | {own} | {trl} | {verl} |" for family, own, trl, verl in METRICS]
    return "\n".join(rows)


def _instead(kind: str, host: str, name: str) -> str:
    return INSTEAD.get((kind, host, name), INSTEAD[(kind, host)]).format(name=name)


def embed(markdown: str) -> str:
    """Replaces the table between the markers in a Markdown text."""
    start, end = markdown.index(BEGIN) + len(BEGIN), markdown.index(END)
    return markdown[:start] + "\n" + hosts_table() + "\n" + markdown[end:]


if __name__ == "__main__":
    print(hosts_table())
