"""What every host of grposcope's components shares: grposcope's own trainer, the TRL subclass, the verl plug-in
and the simulator. It sits below `trainer/` and `integrations/` and imports neither (torch, core and sampling
only), so a TRL or verl user loads none of the one-machine trainer.

    families.py  the component families: the config field that chooses each one's entry, and its registry
    options.py   the options the entries declare by their signatures (one config field each), the check that
                 fields.py is current, and the one policy for an option the chosen entry does not read
    build.py     each chosen component built once per run: the config check's instance is the run's
    state.py     the components' state in a checkpoint (AVSPO's threshold, the sampler's, the monitor's)
"""
