"""The four alarms of a run (stagnation, entropy collapse, KL drift, no signal): their rules, in one place.

`Alarms` is fed one step's figures at a time. The collapse monitor feeds it while a run trains (grposcope's
trainer, the TRL and verl integrations), and `grposcope diagnose` replays a logged run through it (`replay`):
the detectors `advantage_collapse`, `entropy_collapse`, `kl_drift` and `no_signal_steps` build on these rules, so
"entropy collapsed" means the same in a live run's `alarm/entropy_collapse` and in a finding read from its logs.
The rules and their thresholds are in docs/metrics.md ("Alarms"); why each, in docs/diagnose.md.

Pure Python (no torch): the diagnosis of logs imports it without loading a tensor library.
"""

from __future__ import annotations

import itertools
import logging
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

logger = logging.getLogger("grposcope")

NAMES = ("stagnation", "entropy_collapse", "kl_drift", "no_signal")


def alarm_window(run_steps: int | None, longest: int = 50, shortest: int = 5, share: float = 0.1) -> int:
    """Consecutive steps an alarm waits for, fitted to the run's length: a tenth of the run, at least
    `shortest` and at most `longest` (the paper's 50 steps, which a run of fewer than 50 steps never reaches).
    30 steps -> 5, 200 -> 20, 500 or more -> 50; None (length unknown) -> `longest`."""
    if run_steps is None or run_steps <= 0:
        return longest
    return max(shortest, min(longest, math.ceil(round(run_steps * share, 9))))  # round: 30 * 0.1 = 3.0000000004


@dataclass(frozen=True)
class AlarmRules:
    """The thresholds (CollapseMonitor's parameters of the same names)."""

    stagnation_acr: float = 0.35
    stagnation_steps: int = 50
    entropy_floor: float = 0.5
    entropy_steps: int = 50
    kl_bound: float = 0.5
    no_signal_steps: int = 5
    # a rise this large while the entropy is below the floor means the run still learns: no collapse (the
    # held-out score's over the last window, else the mean reward's; Alarms.still_learning)
    entropy_gain: float = 0.05
    # steps an announced alarm must stay off before its "cleared" line (None: the longest of the windows
    # above). An alarm's state may flicker (no_signal goes off at the first step with signal and on again 5
    # steps later); the log says once that it fired and once that it cleared, not at every onset
    quiet_steps: int | None = None

    @property
    def quiet(self) -> int:
        if self.quiet_steps is not None:
            return self.quiet_steps
        return max(self.stagnation_steps, self.entropy_steps, self.no_signal_steps)


class Alarms:
    """The alarms' streaks and states across a run's steps. `update` returns {name: on} for the step; a signal
    passed as None was not measured that step and leaves its alarm as it was. `fired` lists (step, name) at
    every onset. With `warn`, the log gets one line when an alarm fires and one when it has stayed off for
    `rules.quiet` steps (`_announce`), however often its state flickers in between."""

    def __init__(self, rules: AlarmRules = AlarmRules(), warn: bool = True) -> None:
        self.rules = rules
        self.warn = warn  # log a warning at each onset (the trainers); a replay of a log does not
        self.streaks = {"stagnation": 0, "entropy_collapse": 0, "no_signal": 0}
        self.active = {name: False for name in NAMES}
        self.entropy_was_above = False  # the entropy has been at or above the floor (so it can fall)
        self.low_since: int | None = None  # the first step of the entropy's current streak below the floor
        self.rewards: list[float] = []  # the mean reward of the last 2 x entropy_steps steps that logged one
        self.held_out: list[tuple[int, float]] = []  # (step, held-out score): each evaluation, 0 = before training
        self.fired: list[tuple[int, str]] = []
        # what the log has said: name -> [step it fired, last step on, steps on since] while announced
        self.announced: dict[str, list[int]] = {}
        self.settings: dict[str, object] = {}  # the run's own options: an alarm's advice never names one on

    def _streak(self, name: str, holds: bool) -> int:
        self.streaks[name] = self.streaks[name] + 1 if holds else 0
        return self.streaks[name]

    def evaluated(self, step: int, score: float | None) -> None:
        """A held-out evaluation after `step` (0: before training), for the entropy rule's "still learning"."""
        if score is not None and math.isfinite(score):
            self.held_out.append((step, float(score)))

    def update(self, step: int, acr: float | None, entropy: float | None = None, kl: float | None = None,
               no_signal: bool | None = None, reward: float | None = None) -> dict[str, bool]:
        r = self.rules
        now = dict(self.active)
        if reward is not None and math.isfinite(reward):
            self.rewards = [*self.rewards, reward][-2 * r.entropy_steps:]
        if acr is not None:
            now["stagnation"] = self._streak("stagnation", acr > r.stagnation_acr) >= r.stagnation_steps
        if entropy is not None:
            # a collapse is a fall: a policy that starts below the floor on a task never raises it
            self.entropy_was_above = self.entropy_was_above or entropy >= r.entropy_floor
            low = self._streak("entropy_collapse", self.entropy_was_above and entropy < r.entropy_floor)
            self.low_since = (step if low == 1 else self.low_since) if low else None
            # ... and a fall that the score still rises through is convergence, not a collapse
            now["entropy_collapse"] = low > r.entropy_steps and self.still_learning() is False
        if kl is not None:
            now["kl_drift"] = kl > r.kl_bound
        if no_signal is not None:
            now["no_signal"] = self._streak("no_signal", no_signal) >= r.no_signal_steps
        for name, on in now.items():
            if on and not self.active[name]:
                self.fired.append((step, name))
            self.active[name] = on
            self._announce(step, name, on)
        return now

    def still_learning(self) -> bool | None:
        """Whether the run still improves while its entropy is below the floor, over the last window: a gain
        now, not since the run began (a run that learnt, then stalled with its entropy low, has collapsed).
        The held-out score decides when it was measured since the entropy fell below the floor and also at
        least `entropy_steps` steps before that measurement: the latest score at least `entropy_gain` above the
        latest one that old. Otherwise the reward: its mean over the last `entropy_steps` steps at least
        `entropy_gain` above its mean over the `entropy_steps` before them; None (too early to tell: the alarm
        waits) while fewer than two windows of rewards are known. No reward at all: False (the rule as
        before, for a log without one)."""
        gain, w = self.rules.entropy_gain, self.rules.entropy_steps
        if self.held_out and self.low_since is not None and self.held_out[-1][0] >= self.low_since:
            latest_step, latest = self.held_out[-1]
            earlier = [score for s, score in self.held_out if s <= latest_step - w]
            if earlier:
                return latest - earlier[-1] >= gain
        if len(self.rewards) >= 2 * w:
            return math.fsum(self.rewards[-w:]) / w - math.fsum(self.rewards[-2 * w:-w]) / w >= gain
        return None if self.rewards else False

    def _announce(self, step: int, name: str, on: bool) -> None:
        """One line when the alarm fires, none while it stays on or flickers, one once it has been off for
        `rules.quiet` steps in a row (a run near 100% accuracy flipped no_signal every few steps: thousands of
        identical lines)."""
        seen = self.announced.get(name)
        if on and seen is None:
            self.announced[name] = [step, step, 1]
            if self.warn:
                logger.warning("grposcope alarm at step %d: %s. %s", step, name, advice(name, self.settings))
        elif on:
            assert seen is not None  # the branch above took on without seen
            seen[1], seen[2] = step, seen[2] + 1
        elif seen is not None and step - seen[1] >= self.rules.quiet:
            del self.announced[name]
            if self.warn:
                first, last, count = seen
                logger.warning("grposcope alarm cleared at step %d: %s, off since step %d (it was on at %d of "
                               "the %d steps from step %d to %d)", step, name, last + 1, count,
                               last - first + 1, first, last)

    def state_dict(self) -> dict[str, Any]:
        return {"streaks": dict(self.streaks), "active": dict(self.active), "fired": [list(f) for f in self.fired],
                "entropy_was_above": self.entropy_was_above, "low_since": self.low_since,
                "rewards": list(self.rewards), "held_out": [list(e) for e in self.held_out],
                "announced": {name: list(seen) for name, seen in self.announced.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, length in state["streaks"].items():
            self.streaks[name] = int(length)
        self.active.update({name: bool(on) for name, on in state["active"].items()})  # older: no no_signal
        self.fired = [(int(step), str(name)) for step, name in state["fired"]]
        self.entropy_was_above = bool(state.get("entropy_was_above", True))  # older checkpoints: as before
        # older checkpoints: no history, so the entropy rule waits (too early to tell) until it holds two windows
        # of rewards again
        self.low_since = None if state.get("low_since") is None else int(state["low_since"])
        self.rewards = [float(v) for v in state.get("rewards", [])]
        self.held_out = [(int(s), float(v)) for s, v in state.get("held_out", [])]
        # older checkpoints: an alarm on at the save counts as announced (its line was printed before it)
        old = {name: [step, step, 1] for name, step in self._onsets().items() if self.active.get(name)}
        self.announced = {name: [int(v) for v in seen] for name, seen in state.get("announced", old).items()}

    def _onsets(self) -> dict[str, int]:
        """Each alarm's latest onset step."""
        return {name: step for step, name in self.fired}


def _value(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


def replay(steps: Iterable[int], acr: Iterable[float], entropy: Iterable[float], kl: Iterable[float],
           no_signal: Iterable[float], rules: AlarmRules, reward: Iterable[float] | None = None,
           held_out: Iterable[tuple[int, float]] = ()) -> dict[str, list[int]]:
    """A logged run through the alarms: {name: the steps it was on}. Series aligned with `steps`, NaN where a
    step did not log the signal (the alarm keeps its state, as in a live run); `no_signal` holds 1.0 for a step
    without signal, 0.0 for one with, NaN for unknown. `held_out`: (step, score) of the run's evaluations (step 0
    before training), each read after its step's update, as the trainer evaluates after the step."""
    alarms = Alarms(rules, warn=False)
    on: dict[str, list[int]] = {name: [] for name in NAMES}
    evaluations = sorted(held_out)
    rewards = reward if reward is not None else itertools.repeat(math.nan)
    for step, a, e, k, n, m in zip(steps, acr, entropy, kl, no_signal, rewards):
        while evaluations and evaluations[0][0] < step:
            alarms.evaluated(*evaluations.pop(0))
        flag = _value(n)
        state = alarms.update(step, _value(a), _value(e), _value(k), None if flag is None else flag >= 0.5,
                              _value(m))
        for name, active in state.items():
            if active:
                on[name].append(step)
    return on


def advice(name: str, settings: dict[str, object]) -> str:
    """ADVICE[name] without the `option=True` it names that the run already has, said instead."""
    text, on = ADVICE[name], []
    for option in re.findall(r"\b(\w+)=True\b", text):
        if settings.get(option) is True:
            text = re.sub(rf"\b{option}=True(, | or )", "", text)
            on.append(f"{option}=True")
    return text + (f" (already on in this run: {', '.join(on)})" if on else "")


ADVICE = {
    "stagnation": "Most groups have identical rewards, so most prompts give no gradient: try use_avspo=True, "
    "sampler='dynamic' or 'reinforce_ada', a larger num_generations, or easier prompts.",
    "entropy_collapse": "The policy has become nearly deterministic: consider a higher temperature, "
    "clip-higher (epsilon_high=0.28) or an entropy bonus.",
    "kl_drift": "The policy has moved far from the reference: consider a larger beta or a lower learning rate.",
    "no_signal": "Several steps in a row had no gradient (every group's rewards were equal), so nothing was "
    "learned from them; with skip_no_signal_steps=False AdamW kept moving the weights anyway. Try "
    "use_avspo=True, sampler='dynamic' or 'reinforce_ada', a larger num_generations, or prompts nearer the "
    "model's level.",
}
