"""The model capability catalog: which model honours which request controls.

from gateway.catalog import Catalog
catalog = Catalog.load()
catalog.get("claude-opus-5-5").sampling   # "none": defaults only
"""

from gateway.catalog._loader import Catalog, CatalogError
from gateway.catalog._model import ModelInfo

__all__ = ["Catalog", "CatalogError", "ModelInfo"]
