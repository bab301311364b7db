"""grposcope inside other trainers, for runs that outgrow one machine.

    from grposcope.integrations.trl import GRPOTrainer, GRPOConfig   # TRL (vLLM, DeepSpeed / FSDP)
    import grposcope.integrations.verl                               # verl: algorithm.adv_estimator=avspo

Each adapter is thin: it translates its host's batch into (B, G) rewards and calls `grposcope.core` and
`grposcope.sampling`, so that a metric means the same in all three trainers. Neither is imported here: each
needs its host installed (docs/integrations.md).
"""
