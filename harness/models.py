"""Where a model named in a spec comes from — a local directory, the Hugging Face cache, or the
Hub — decided *before* anything loads, so a model that cannot be had is one clear error at once
instead of a minute of download retries ending in a transformers traceback.

:func:`locate_model` answers for ``hf:`` backends and sentence-transformers encoders (``embed:``):

* a local directory: used as it is;
* a Hub id whose files are in the local Hugging Face cache: used from there, with
  ``local_files_only=True`` when the Hub is offline (``HF_HUB_OFFLINE=1``) or cannot be reached,
  so transformers does not retry the network;
* a Hub id not in the cache: downloaded when the Hub answers; with ``HF_HUB_OFFLINE=1`` or an
  unreachable Hub it is :class:`ModelUnavailableError` naming the model and the way out (download it
  where there is network, or point the spec at a local directory).

The reachability probe is one metadata request with a short timeout (:data:`PROBE_TIMEOUT_S`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness.types import BackendConfigError

#: seconds the one Hub metadata request may take before the Hub counts as unreachable
PROBE_TIMEOUT_S = 5.0
_PATH_PREFIXES = ("/", "./", "../", "~", ".\\", "..\\")


class ModelUnavailableError(BackendConfigError):
    """The model a spec names is neither a local directory, nor cached, nor downloadable now (a
    configuration error: a run stops at once instead of being marked incomplete to resume)."""


@dataclass(frozen=True)
class ModelLocation:
    """``kind``: ``local`` (a directory), ``cached`` (in the HF cache) or ``hub`` (to download)."""

    target: str
    kind: str
    local_files_only: bool = False


def is_local_dir(target: str) -> bool:
    """Whether ``target`` names an existing directory (False for names the OS refuses: too long, NUL)."""
    try:
        return Path(target).expanduser().is_dir()
    except (OSError, ValueError):
        return False


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set."""
    from huggingface_hub import constants

    env = os.environ.get("TRANSFORMERS_OFFLINE", "").strip().lower()
    return bool(constants.is_offline_mode()) or env in ("1", "true", "yes", "on")


def locate_model(
    target: str, revision: str | None = None, *, owner: str = "model", local_form: str | None = None
) -> ModelLocation:
    """Where ``target`` (a directory or a Hub model id) will be loaded from; raises
    :class:`ModelUnavailableError` (a :class:`~harness.types.BackendConfigError`) when it cannot be
    had now. ``owner`` starts the message; ``local_form`` shows how to name a local directory
    instead (default ``<first word of owner>:/path/to/model``, e.g. ``hf:/path/to/model``)."""
    if is_local_dir(target):
        return ModelLocation(target, "local")
    local_hint = (
        f"point the spec at a local directory instead ({local_form or owner.split()[0] + ':/path/to/model'})"
    )
    if target.startswith(_PATH_PREFIXES):
        raise ModelUnavailableError(f"{owner} {_short(target)}: no such directory; {local_hint}")
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(target)
    except HFValidationError:
        raise ModelUnavailableError(
            f"{owner} {_short(target)} is neither a local directory nor a Hugging Face model id "
            f"(namespace/name); {local_hint}"
        ) from None
    cached = _in_cache(target, revision)
    offline = hub_offline()
    if offline and cached:
        return ModelLocation(target, "cached", local_files_only=True)
    reason = "HF_HUB_OFFLINE is set" if offline else _probe(target, revision)
    if reason is None:
        return ModelLocation(target, "cached" if cached else "hub")
    if cached:
        return ModelLocation(target, "cached", local_files_only=True)
    rev = f"@{revision}" if revision else ""
    raise ModelUnavailableError(
        f"{owner} {target}{rev} is not available offline: it is not in the Hugging Face cache and {reason}; "
        f"download it once where there is network (hf download {target}) or {local_hint}"
    )


def _in_cache(target: str, revision: str | None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    for name in ("config.json", "adapter_config.json", "modules.json"):
        try:
            found = try_to_load_from_cache(target, name, revision=revision)
        except (OSError, ValueError):
            return False
        if isinstance(found, str):
            return True
    return False


def _probe(target: str, revision: str | None) -> str | None:
    """None when the Hub answers for ``target``; else why it cannot be used (one phrase)."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import (
        GatedRepoError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        HfApi(endpoint=constants.ENDPOINT).model_info(target, revision=revision, timeout=PROBE_TIMEOUT_S)
    except OfflineModeIsEnabled:
        return "HF_HUB_OFFLINE is set"
    except GatedRepoError:
        return None  # gated: transformers reports the access problem with its own message
    except RevisionNotFoundError:
        return f"the Hub has no revision {revision!r} of it"
    except RepositoryNotFoundError:
        return "the Hub has no such model (or it is private: set HF_TOKEN)"
    except Exception as e:  # noqa: BLE001 - any other answer means the Hub is there: let the loader decide
        if _network_error(e):  # no network, DNS, refused, timeout
            return f"the Hub ({constants.ENDPOINT}) cannot be reached ({type(e).__name__})"
        return None
    return None


def _network_error(e: BaseException) -> bool:
    """A transport failure: OSError (requests), or httpx / httpx2's TransportError (the class the
    installed huggingface_hub raises depends on its version, so it is matched by name)."""
    names = {c.__name__ for c in type(e).__mro__}
    return isinstance(e, OSError) or bool(names & {"TransportError", "TimeoutException", "ConnectionError"})


def _short(text: str, n: int = 80) -> str:
    return repr(text) if len(text) <= n else repr(text[: n - 3] + "...")
