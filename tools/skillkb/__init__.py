"""skillkb: canonical skills for vLLM on Ascend NPUs — models, validation, indexing, retrieval, evaluation.

The public functions live in ``skillkb.api``; they are re-exported lazily so that ``import skillkb`` (and
the CLI's search path) does not pay for pydantic models it does not use.
"""

from __future__ import annotations

from typing import Any

# ``validate`` is left out on purpose: ``skillkb.validate`` is the validation module.
__all__ = ["evaluate", "load_library", "search", "show", "verify_readsets", "write_index"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import api

        return getattr(api, name)
    raise AttributeError(name)
