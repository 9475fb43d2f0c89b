"""Lazy access to the heavy stack (torch, diffusers, transformers): device and dtype choice,
and a clear message when the `numgen` extra is not installed."""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from numerate.kernel.errors import NumerateError, printable, shorten
from numerate.kernel.http import Unanswered, answer

INSTALL_HINT = "pip install -c constraints.txt -e '.[numgen]'"
DTYPES = ("auto", "float32", "float16", "bfloat16")


class MissingExtraError(NumerateError):
    """A NumGen model backend was asked for without the `numgen` extra installed."""


class ModelLoadError(NumerateError):
    """A model id or path that cannot be loaded (unknown, not downloaded, not a model)."""


HUB_TIMEOUT_S = 5.0
"""How long the hub may take to answer the reachability check (NUMERATE_HUB_TIMEOUT)."""

OFF = ("1", "true", "yes", "on")


def check_available(model_id: str, marker: str, what: str) -> None:
    """Raise ModelLoadError when `model_id` can surely not be loaded: a local folder without
    its `marker` file, or a hub id that is not in the Hugging Face cache while the hub cannot
    be used (HF_HUB_OFFLINE=1, or no answer within NUMERATE_HUB_TIMEOUT seconds). When the
    hub does not answer and the model is cached, the process goes offline, so that loading
    it never waits on the network. Checked before a run starts: a missing model writes
    nothing, and no command sits in the hub client's retries."""
    path = Path(model_id).expanduser()
    try:
        exists = path.exists()
    except OSError as error:  # no path this machine takes (a name too long: ENAMETOOLONG)
        raise ModelLoadError(f"{what} {shorten(model_id)!r}: {error.strerror}") from None
    if exists or model_id.startswith((".", "/", "~")):
        if not path.is_dir():  # a path, not a hub id: "no config.json in that folder" of none
            found = "is a file, not a model's folder" if exists else "no such folder"
            raise ModelLoadError(f"{what} {model_id!r}: {found}")
        if not (path / marker).is_file():
            raise ModelLoadError(f"{what} {model_id!r}: no {marker} in that folder")
        return
    raw = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    if raw not in (*OFF, "", "0", "false", "no", "off"):  # the hub client reads it as "online"
        raise ModelLoadError(f"HF_HUB_OFFLINE={raw!r}: give 1 (offline) or 0 (online)")
    offline = raw in OFF
    unreachable = None if offline else hub_unreachable()
    if unreachable is not None:
        go_offline()
    hub = require("huggingface_hub")
    try:
        found = hub.try_to_load_from_cache(model_id, marker)
    except ValueError as error:  # not a valid repo id
        raise ModelLoadError(f"{what} {model_id!r}: {printable(str(error))}") from None
    if isinstance(found, str) or not (offline or unreachable):
        return  # cached, or the hub can be asked for it
    why = "HF_HUB_OFFLINE=1 forbids downloading it" if offline else unreachable
    raise ModelLoadError(
        f"{what} {model_id!r} is not in the Hugging Face cache ({hub.constants.HF_HUB_CACHE}) "
        f"and {why}: download it where the hub can be reached (`hf download {model_id}`) "
        f"and copy the cache or set HF_HOME to it, or give a local folder with {marker}"
    )


_probed: dict[str, str | None] = {}


def hub_unreachable() -> str | None:
    """Asked once per process and endpoint: see `probe_hub`."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    if endpoint not in _probed:
        _probed[endpoint] = probe_hub(endpoint)
    return _probed[endpoint]


def probe_hub(endpoint: str) -> str | None:
    """Why the Hugging Face hub ($HF_ENDPOINT) cannot be used now, or None when it answers
    (any HTTP answer counts, read whole) within NUMERATE_HUB_TIMEOUT seconds; ModelLoadError
    for a NUMERATE_HUB_TIMEOUT that is no number of seconds."""
    raw = os.environ.get("NUMERATE_HUB_TIMEOUT", "").strip()
    try:
        timeout = float(raw) if raw else HUB_TIMEOUT_S
    except ValueError:
        timeout = -1.0
    if not 0.1 <= timeout <= 60.0:  # NaN too
        raise ModelLoadError(f"NUMERATE_HUB_TIMEOUT={raw!r}: give seconds, from 0.1 to 60")
    named = "HF_ENDPOINT" in os.environ  # a mistyped variable read as the hub's own fault
    hub = f"the hub (HF_ENDPOINT={endpoint!r})" if named else f"the hub ({endpoint})"
    try:
        answer(f"{endpoint}/api/models?limit=1", timeout)  # any status: it answered
    except Unanswered as error:
        if error.timed_out:
            return f"{hub} did not answer within {timeout:g} s"
        return f"{hub} cannot be reached ({error.reason})"
    return None


_offline: list[bool] = []  # the hub did not answer: models load from the cache only


def go_offline() -> None:
    """Load from the cache only from now on: every load passes `local_files_only`
    (`cache_only()`), and processes started later inherit HF_HUB_OFFLINE=1 (huggingface_hub
    reads it once, at its import)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    _offline.append(True)


def cache_only() -> bool:
    """Whether models load from the Hugging Face cache only (`local_files_only`): offline by
    HF_HUB_OFFLINE, or since the hub did not answer (`go_offline`)."""
    return bool(_offline) or os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in OFF


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
