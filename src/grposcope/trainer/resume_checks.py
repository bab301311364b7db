"""What a checkpoint must fit before a run resumes from it, checked before anything is loaded or written:
the model (the shapes its config.json gives; loading another model's weights ends in a long `size mismatch`
traceback) and the run's length (a checkpoint past max_steps would "resume" at step 2 of 1 and then write
the model and summary again over the run's own).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .checkpoint import CheckpointError, read_info

# config.json fields that set the shapes of the weights (Llama, Qwen, Mistral, GPT-2, OPT, T5 names); the
# others (token ids, RoPE scaling, dropout) may differ between two copies of one model.
SHAPE_FIELDS = (
    "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "n_embd", "n_layer", "n_head", "n_inner", "n_positions", "d_model",
    "num_layers", "ffn_dim",
)


def checked_info(folder: Path, model: Any, max_steps: int, args: Any) -> dict[str, Any]:
    """trainer_state.json of checkpoint `folder`, once the checkpoint is found to fit `model` and a run of
    `max_steps` steps; raises CheckpointError naming what does not fit and what to do."""
    info = read_info(folder)
    check_same_model(folder, model, info.get("config", {}).get("model_name_or_path"))
    step = int(info.get("global_step", 0))
    if step > max_steps:
        limit = (f"--max_steps {args.max_steps}" if args.max_steps > 0 else
                 f"the run's {max_steps} steps (num_train_epochs={args.num_train_epochs})")
        fix = "raise --max_steps" if args.max_steps > 0 else "set --max_steps"
        raise CheckpointError(f"{folder} is at step {step}, past {limit}: there is nothing left to train; {fix} "
                              f"(above {step}) to continue the run, or start a new one in another output_dir")
    return info


def check_same_model(folder: Path, model: Any, trained_from: str | None) -> None:
    """Raises when the checkpoint's config.json gives other shapes than the model being trained. A checkpoint
    without one (LoRA adapters alone) is checked tensor by tensor when loaded (checkpoint.load_weights)."""
    try:
        saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    here = model.config.to_dict() if hasattr(getattr(model, "config", None), "to_dict") else {}
    if not isinstance(saved, dict):
        return
    differ = [f"{k} {saved[k]} there, {here[k]} here" for k in SHAPE_FIELDS
              if k in saved and k in here and saved[k] is not None and here[k] is not None and saved[k] != here[k]]
    if differ:
        source = f" ({trained_from})" if trained_from else ""
        raise CheckpointError(f"{folder} was saved from another model ({'; '.join(differ)}); resume with the "
                              f"--model_name_or_path it was trained from{source}, or choose another output_dir")
