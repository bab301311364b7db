"""Checkpoints a run resumes from: written atomically, verified before they are loaded.

    output_dir/checkpoint-N/        a Hugging Face folder (`grposcope eval --model .../checkpoint-N` reads it)
        model.safetensors, config.json, tokenizer files     (adapter_model.safetensors with LoRA)
        optimizer.pt, scheduler.pt     state dicts of tensors and numbers, read back with weights_only=True
        trainer_state.pt               step, data position, estimator, monitor, RNGs, the in-flight generation
        trainer_state.json             the same step for people and tools: step, metrics.jsonl offset, config
        manifest.json                  written last: size and sha256 of every other file

A checkpoint is written into a hidden `.tmp-checkpoint-N` folder and renamed into place only once complete,
so a run killed while saving leaves no `checkpoint-N` behind. A `checkpoint-N` that fails its manifest check
(truncated or corrupted by something else: a full disk, a partial copy) is skipped with a warning when the
newest checkpoint is looked for, and refused with the reason when named explicitly.
A save that does not fit on the disk (checked against an estimate before writing, or failing with ENOSPC while
writing) raises DiskFullError and keeps nothing of it; metrics.jsonl and earlier checkpoints stay as they were.
Nothing here unpickles code: tensors load through safetensors, everything else with `weights_only=True`.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import warnings
from pathlib import Path
from typing import Any, Sequence

import torch

from .. import manifest as mf
from ..components.state import read_state_file
from ..errors import CheckpointError
from ..logging.backends import METRICS_FILE
from . import disk_space
from .run_folder import (
    FORMAT,
    STATE,
    STATE_JSON,
    checkpoint_folders,
    holds_metrics,
    latest_checkpoint,
    nearest_existing,
    repair,
    step_of,
    verify,
)

_TMP_PREFIX = ".tmp-"


# --- writing ---------------------------------------------------------------------------------------------


def save_checkpoint(output_dir: str | os.PathLike[str], step: int, *, model, tokenizer, optimizer, scheduler,
                    state: dict[str, Any], info: dict[str, Any], save_total_limit: int | None = None) -> Path:
    """Writes `output_dir/checkpoint-<step>` atomically, then keeps the newest `save_total_limit` ones.

    `state` is what the trainer needs to continue (tensors, numbers, strings, lists, dicts); `info` is the
    human-readable part written to trainer_state.json.
    """
    target = Path(output_dir) / f"checkpoint-{step}"

    def write(folder: Path) -> None:
        save_weights(folder, model, tokenizer)
        torch.save(optimizer.state_dict(), folder / "optimizer.pt")
        torch.save(scheduler.state_dict(), folder / "scheduler.pt")
        torch.save({"format": FORMAT, **state, "rng": rng_state()}, folder / STATE)
        (folder / STATE_JSON).write_text(json.dumps({"format": FORMAT, **info}, indent=2, default=str) + "\n")

    needs = disk_space.estimate_checkpoint_bytes(output_dir, model, optimizer)
    write_folder_atomically(target, write, kind="checkpoint", needs=needs)
    if save_total_limit:
        rotate(Path(output_dir), save_total_limit, keep=target)
    return target


def save_weights(folder: Path, model, tokenizer) -> None:
    """The model (safetensors; adapters only with LoRA) and its tokenizer, as a Hugging Face folder."""
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)


def save_final_model(target: Path, model, tokenizer) -> None:
    """The trained model and tokenizer in `target` (output_dir/model), written atomically like a checkpoint,
    with a manifest that `grposcope eval` checks it against."""
    needs = disk_space.estimate_model_bytes(target.parent, model)
    write_folder_atomically(target, lambda tmp: save_weights(tmp, model, tokenizer), kind="model", needs=needs)


def write_folder_atomically(target: Path, write, kind: str | None = None, needs: int = 0) -> None:
    """Calls `write(tmp)` on a fresh hidden folder next to `target`, then renames it to `target`.

    With `kind` ("checkpoint" or "model"), every file's size and sha256 go into manifest.json, written last.
    An existing `target` (a checkpoint of the same step from before a resume, an earlier final model) is
    replaced only after the new one is complete, and only what grposcope wrote of it is deleted.
    `needs` (bytes, an estimate) is checked against the free space first; a write that fills the disk anyway
    raises DiskFullError too. Either way nothing of `target` is left behind.
    """
    free = shutil.disk_usage(nearest_existing(target.parent)).free
    if needs and free < needs:
        raise disk_space.disk_full(target, needs, free)
    tmp = target.parent / f"{_TMP_PREFIX}{target.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        write(tmp)
        if kind is not None:
            mf.write(tmp, format=FORMAT, kind=kind)
        for path in tmp.iterdir():
            mf.fsync(path)
        old = target.parent / f"{_TMP_PREFIX}old-{target.name}-{os.getpid()}"
        if target.exists():
            os.replace(target, old)
        os.replace(tmp, target)
        if old.exists():
            _set_aside_what_stays(old, target)
        mf.fsync(target.parent)
    except BaseException as err:
        shutil.rmtree(tmp, ignore_errors=True)
        if disk_space.is_disk_full(err):
            raise disk_space.disk_full(target, needs, free, failure=err) from err
        raise


def rotate(output_dir: Path, limit: int, keep: Path) -> list[Path]:
    """Deletes the oldest checkpoints beyond the newest `limit` (never `keep`); returns the deleted ones."""
    folders = sorted(checkpoint_folders(output_dir), key=step_of, reverse=True)
    doomed = [p for p in folders[limit:] if p != keep]
    for folder in doomed:
        if folder.is_symlink():  # nothing is deleted through a link: the folder it names is the user's
            warnings.warn(f"save_total_limit: left {folder} in place: it is a link to {os.path.realpath(folder)}, "
                          "and grposcope deletes nothing through a link; remove the link yourself when it can go",
                          RuntimeWarning, stacklevel=3)
            continue
        left = mf.remove_written(folder)
        if left:
            warnings.warn(f"save_total_limit: kept {folder}, which holds files grposcope did not write "
                          f"({_names(left)}); delete it yourself if it can go", RuntimeWarning, stacklevel=3)
    return doomed


def remove_checkpoints(folders: list[Path]) -> list[str]:
    """Deletes what grposcope wrote into each checkpoint folder (the files its manifest lists); returns one
    note per folder left in place, naming what stayed (a user's file, or a folder without a manifest)."""
    notes = []
    for folder in folders:
        if folder.is_symlink():  # nothing is deleted through a link
            notes.append(f"left {folder} in place: it is a link to {os.path.realpath(folder)}, and grposcope deletes "
                         "nothing through a link")
            continue
        data, why = mf.read(folder)
        left = mf.remove_written(folder)
        if data is None:
            notes.append(f"left {folder} in place: {why}, so grposcope did not write it ({_names(left)})")
        elif left:
            notes.append(f"removed the checkpoint files of {folder} but left what grposcope did not write "
                         f"there ({_names(left)})")
    return notes


def _set_aside_what_stays(old: Path, target: Path) -> None:
    """After `target` was replaced by a new folder, deletes what grposcope wrote into its earlier copy (`old`,
    a hidden name) and gives anything else a visible name beside it, since hidden folders are removed as
    leftovers of killed saves."""
    left = mf.remove_written(old)
    if not left:
        return
    n = 1
    while (target.parent / f"{target.name}.kept-{n}").exists():
        n += 1
    kept = target.parent / f"{target.name}.kept-{n}"
    os.replace(old, kept)
    warnings.warn(f"{target} was written again; what grposcope did not write in the earlier one "
                  f"({_names(left)}) is now in {kept}", RuntimeWarning, stacklevel=4)


def _names(names: list[str], shown: int = 3) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def remove_unfinished(output_dir: str | os.PathLike[str]) -> list[str]:
    """Removes hidden temporary folders left by a run killed while saving; returns their names.

    Only one run writes into an output_dir at a time, so at the start of a run none of them is live.
    """
    root = Path(output_dir)
    if not root.is_dir():
        return []
    leftovers = [p for p in root.iterdir() if p.is_dir() and p.name.startswith(_TMP_PREFIX)]
    for path in leftovers:
        shutil.rmtree(path, ignore_errors=True)
    return [p.name for p in leftovers]


# --- what to resume from (finding and verifying a checkpoint: run_folder.py) --------------------------------


def resolve(spec: str | bool, output_dir: str | os.PathLike[str]) -> Path:
    """The checkpoint `resume_from_checkpoint` names: True = the newest complete one in output_dir."""
    if spec is True:
        with warnings.catch_warnings(record=True) as skipped:  # said once found, or in the error if none is
            warnings.simplefilter("always")
            found = latest_checkpoint(output_dir)
        if found is None and checkpoint_folders(Path(output_dir)):
            raise _none_complete(output_dir)
        for warning in skipped:
            warnings.warn(warning.message, warning.category, stacklevel=2)
        if found is None and holds_metrics(Path(output_dir)):
            # the run there cannot be continued, and a new run refuses its folder: name the one way on
            raise CheckpointError(
                f"resume_from_checkpoint=True, but {output_dir} holds a run's {METRICS_FILE} and no complete "
                "checkpoint (checkpoint-N folders are written every save_steps), so --resume has nothing to "
                f"continue: start the run over without --resume and with {disk_space.start_over(output_dir)}; or point "
                "resume_from_checkpoint at a checkpoint folder"
            )
        if found is None:
            raise CheckpointError(
                f"resume_from_checkpoint=True, but {output_dir} holds no complete checkpoint (checkpoint-N "
                "folders are written every save_steps); start without --resume, or point "
                "resume_from_checkpoint at a checkpoint folder"
            )
        return found
    if not isinstance(spec, (str, os.PathLike)):  # False: nothing to resume; the trainer never asks then
        raise TypeError(f"resume_from_checkpoint={spec!r} names no checkpoint: True or a checkpoint folder")
    folder = Path(spec)
    if not folder.is_dir():
        what = "is a file, not a checkpoint folder" if folder.exists() else "does not exist"
        raise CheckpointError(f"checkpoint {folder} {what}; give a checkpoint-N folder of a run")
    problem = verify(folder)
    if problem is not None:
        with warnings.catch_warnings():  # the folders it passes over are not this resume's concern
            warnings.simplefilter("ignore")
            older = latest_checkpoint(folder.parent)
        hint = f"resume from {older} instead" if older is not None and older != folder else \
            f"{repair(folder)} if you have it, or {_start_anew(output_dir, '--resume_from_checkpoint')}"
        raise CheckpointError(f"cannot resume from {folder}: {problem}; {hint}")
    return folder


def _none_complete(output_dir: str | os.PathLike[str]) -> CheckpointError:
    """--resume where every checkpoint fails `verify` (a file removed by hand, a partial copy): each one's
    problem, and the ways on; pointing resume_from_checkpoint at one of them would fail the same way."""
    folders = sorted(checkpoint_folders(Path(output_dir)), key=step_of, reverse=True)
    said = "; ".join(f"{folder.name}: {verify(folder)}" for folder in folders[:3])
    more = f"; and {len(folders) - 3} more" if len(folders) > 3 else ""
    return CheckpointError(f"resume_from_checkpoint=True, but no checkpoint in {output_dir} is complete ({said}"
                           f"{more}), so --resume has nothing to continue: {repair(folders[0])} if you have it, or "
                           f"{_start_anew(output_dir, '--resume')}")


def _start_anew(output_dir: str | os.PathLike[str], option: str) -> str:
    """The way on when no checkpoint can be resumed: a new run, which a used output_dir takes only with
    overwrite_output_dir."""
    if holds_metrics(Path(output_dir)):
        return f"start the run over without {option} and with {disk_space.start_over(output_dir)}"
    return f"start a new run without {option}"


# Options that shape the run's state: a checkpoint written under other values cannot be continued with these.
STRUCTURAL = (
    "seed", "num_generations", "per_device_train_batch_size", "gradient_accumulation_steps",
    "generation_batch_size", "steps_per_generation", "num_iterations", "use_peft", "lora_r",
    "lora_target_modules", "advantage_estimator", "sampler", "dataset_name", "dataset_size", "eval_size",
)
# Options that may differ without a word (where things go, how often they are printed).
_QUIET = ("output_dir", "overwrite_output_dir", "resume_from_checkpoint", "logging_steps", "report_to", "run_name")


def check_resumable(info: dict[str, Any], config: dict[str, Any], data_fingerprint: str) -> list[str]:
    """Raises when the run being started cannot continue the checkpoint's; returns notes on the options
    that changed but can (e.g. max_steps, to extend a run)."""
    saved = info.get("config", {})
    clash = [k for k in STRUCTURAL if k in saved and saved[k] != config.get(k)]
    if clash:
        said = ", ".join(f"{k}={saved[k]!r} (now {config.get(k)!r})" for k in clash)
        raise CheckpointError(
            f"the checkpoint was written with {said}; resume with the same values, or start a new run in "
            "another output_dir"
        )
    if info.get("data_fingerprint") not in (None, data_fingerprint):
        raise CheckpointError(
            "the training prompts differ from those of the run that wrote the checkpoint, so its data "
            "position means nothing here; resume with the same dataset, or start a new run"
        )
    changed = [k for k in saved if k not in STRUCTURAL + _QUIET and saved[k] != config.get(k)]
    return [f"changed since the checkpoint: {', '.join(f'{k}={config.get(k)!r}' for k in changed)}"] if changed else []


def fingerprint(examples: Sequence[dict[str, Any]]) -> str:
    """A digest of the training prompts in order: the data position of a checkpoint refers to them."""
    digest = hashlib.sha256()
    for example in examples:
        digest.update(str(example.get("prompt_text", example.get("prompt"))).encode() + b"\0")
    return digest.hexdigest()[:16]


# --- reading -----------------------------------------------------------------------------------------------


def load_checkpoint(folder: Path, *, model, optimizer, scheduler) -> dict[str, Any]:
    """Loads weights, optimizer and scheduler into the live objects; returns the trainer state (RNGs set)."""
    load_weights(folder, model)
    optimizer.load_state_dict(_load_torch(folder / "optimizer.pt"))
    scheduler.load_state_dict(_load_torch(folder / "scheduler.pt"))
    state = _load_torch(folder / STATE)
    set_rng_state(state.pop("rng"))
    return state


def read_info(folder: Path) -> dict[str, Any]:
    return json.loads((folder / STATE_JSON).read_text())


def load_weights(folder: Path, model) -> None:
    """Copies the checkpoint's weights into `model` (the same architecture, built by the run's setup)."""
    from safetensors.torch import load_file

    from ..models import is_peft_model

    if is_peft_model(model):
        from peft import set_peft_model_state_dict

        try:
            result: Any = set_peft_model_state_dict(model, load_file(folder / "adapter_model.safetensors"))
        except RuntimeError as err:  # torch's "size mismatch for ..." lines, one per tensor
            first = next((line.strip() for line in str(err).splitlines() if "size mismatch" in line), str(err))
            raise CheckpointError(f"{folder}: the adapter weights do not fit the model ({first[:200]}); resume "
                                  "with the model_name_or_path, lora_r and lora_target_modules of the run that "
                                  "wrote it") from None
        if result.unexpected_keys:
            raise CheckpointError(f"{folder}: adapter weights {result.unexpected_keys[:3]} do not fit the model "
                                  "(different lora_r or lora_target_modules?)")
        return
    tensors: dict[str, torch.Tensor] = {}
    for file in sorted(folder.glob("model*.safetensors")):  # one file, or the shards of a large model
        tensors.update(load_file(file))
    _check_shapes(folder, model, tensors)
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    untied = [name for name in missing if not _is_tied(model, name, tensors)]
    if unexpected or untied:
        raise CheckpointError(
            f"{folder}: the weights do not fit the model (missing {untied[:3]}, unexpected {unexpected[:3]}); "
            "resume with the model_name_or_path and use_peft of the run that wrote it"
        )


def _check_shapes(folder: Path, model, tensors: dict[str, torch.Tensor]) -> None:
    """Names the first tensor of another shape: load_state_dict raises one traceback line per tensor."""
    own = model.state_dict()
    for name, tensor in tensors.items():
        if name in own and own[name].shape != tensor.shape:
            there, here = ("x".join(map(str, t.shape)) for t in (tensor, own[name]))
            raise CheckpointError(f"{folder}: the weights do not fit the model ({name} is {there} there, {here} "
                                  "here); resume with the model_name_or_path of the run that wrote it")


def _is_tied(model, name: str, loaded: dict[str, torch.Tensor]) -> bool:
    """True when parameter `name` is the same tensor as a loaded one (tied embeddings are saved once)."""
    params = dict(model.named_parameters(remove_duplicate=False))
    if name not in params:
        return False
    return any(params.get(other) is params[name] for other in loaded)


def _load_torch(path: Path) -> Any:
    return read_state_file(path, "Resume from another checkpoint, or start a new run.")


# The components' state (AVSPO's threshold, the sampler's, the monitor's): grposcope.components.state


# --- RNGs --------------------------------------------------------------------------------------------------


def rng_state() -> dict[str, Any]:
    """Every random generator a run draws from: Python's, numpy's, torch's CPU and CUDA ones."""
    import numpy as np

    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": [kind, torch.from_numpy(keys.copy()), pos, has_gauss, cached],  # type: ignore[attr-defined]
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np

    random.setstate(_as_tuples(state["python"]))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy(), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _as_tuples(value: Any) -> Any:
    return tuple(_as_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value
