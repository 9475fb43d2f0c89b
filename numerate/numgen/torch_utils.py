"""Lazy access to the heavy stack (torch, diffusers, transformers): device and dtype choice,
and a clear message when the `numgen` extra is not installed."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

from numerate.kernel.errors import NumerateError

INSTALL_HINT = "pip install -c constraints.txt -e '.[numgen]'"
DTYPES = ("auto", "float32", "float16", "bfloat16")


class MissingExtraError(NumerateError):
    """A NumGen model backend was asked for without the `numgen` extra installed."""


class ModelLoadError(NumerateError):
    """A model id or path that cannot be loaded (unknown, not downloaded, not a model)."""


def check_available(model_id: str, marker: str, what: str) -> None:
    """Raise ModelLoadError when `model_id` can surely not be loaded: a local folder without
    its `marker` file, or a hub id that is not in the Hugging Face cache while downloads are
    off (HF_HUB_OFFLINE=1). Checked before a run starts, so a missing model writes nothing."""
    import os
    from pathlib import Path

    path = Path(model_id).expanduser()
    if path.exists() or model_id.startswith((".", "/", "~")):
        if not (path / marker).is_file():
            raise ModelLoadError(f"{what} {model_id!r}: no {marker} in that folder")
        return
    if os.environ.get("HF_HUB_OFFLINE", "").lower() not in ("1", "true", "yes", "on"):
        return  # it may be downloaded
    hub = require("huggingface_hub")
    try:
        found = hub.try_to_load_from_cache(model_id, marker)
    except ValueError as error:  # not a valid repo id
        raise ModelLoadError(f"{what} {model_id!r}: {error}") from None
    if not isinstance(found, str):
        raise ModelLoadError(
            f"{what} {model_id!r} is not in the Hugging Face cache, and HF_HUB_OFFLINE=1 "
            "forbids downloading it (download it on a connected machine, or give a local path)"
        )


def require(module: str) -> Any:
    """Import `module` or explain how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise MissingExtraError(
            f"{module} is not installed; NumGen's model backends need it: {INSTALL_HINT}"
        ) from error


def resolve_device(device: str) -> str:
    """`auto` -> cuda when a GPU is visible, else mps, else cpu; anything else is checked."""
    torch = require("torch")
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    try:
        torch.device(device)
    except RuntimeError:
        raise ValueError(f"device must be auto, cpu, cuda, cuda:N or mps, got {device!r}") from None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device = {device!r} but no CUDA GPU is visible")
    return device


def resolve_dtype(dtype: str, device: str) -> Any:
    """A torch dtype from its name; `auto` is bfloat16 on a GPU and float32 on the CPU."""
    torch = require("torch")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if dtype == "auto":
        return torch.bfloat16 if device.startswith(("cuda", "mps")) else torch.float32
    return getattr(torch, dtype)


@contextlib.contextmanager
def transformers_quietly() -> Iterator[None]:
    """Load models without progress bars or the torchvision fallback notice (transformers'
    PIL image processor is the intended path here)."""
    transformers = require("transformers")
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(verbosity)
        transformers.logging.enable_progress_bar()
