"""Lazy access to the heavy stack (torch, diffusers, transformers): device and dtype choice,
and a clear message when the `numgen` extra is not installed."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

from kernel.errors import NumerateError

INSTALL_HINT = "pip install -c constraints.txt -e '.[numgen]'"
DTYPES = ("auto", "float32", "float16", "bfloat16")


class MissingExtraError(NumerateError):
    """A NumGen model backend was asked for without the `numgen` extra installed."""


class ModelLoadError(NumerateError):
    """A model id or path that cannot be loaded (unknown, not downloaded, not a model)."""


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
