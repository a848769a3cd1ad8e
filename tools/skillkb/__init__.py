"""skillkb: canonical skills for vLLM on Ascend NPUs — models, validation, indexing, retrieval, evaluation."""

from .api import load_library, show, validate, verify_readsets, write_index

__all__ = ["load_library", "show", "validate", "verify_readsets", "write_index"]
