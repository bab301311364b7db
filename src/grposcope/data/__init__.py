"""grposcope.data: training prompts with verifiable answers, and their held-out eval split.

    from grposcope.data import load_task
    data = load_task("arithmetic", size=600, seed=0)      # or "rg:<name>", a .jsonl path, a Dataset, a list
    data.train[0]   # {"prompt": [...messages...], "answer": "12", "level": "easy"}
    data.eval, data.reward_funcs

An example is a dict with a `prompt` (a string, or chat messages) and extra columns (`answer`, `level`,
...) that reach the reward functions as keyword arguments. Importing this package is cheap: reasoning-gym
and datasets are imported only when used.
"""

from __future__ import annotations

from .arithmetic import LEVELS, build_arithmetic
from .chat import completion_text, is_conversational, render_prompt
from .gym import ReasoningGymReward, build_reasoning_gym
from .jsonl import read_math_jsonl
from .split import split_examples
from .tasks import TASKS, TaskData, load_task
from .validation import check_prompt, validate_examples

__all__ = [
    "LEVELS",
    "TASKS",
    "ReasoningGymReward",
    "TaskData",
    "build_arithmetic",
    "build_reasoning_gym",
    "check_prompt",
    "completion_text",
    "is_conversational",
    "load_task",
    "read_math_jsonl",
    "render_prompt",
    "split_examples",
    "validate_examples",
]
