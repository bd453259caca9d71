from .base import Page, Store
from .sql import SQLStore, open_store

__all__ = ["Page", "SQLStore", "Store", "open_store"]
