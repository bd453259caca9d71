"""The response store, split by role (see sqlstore.py): callers type their parameter with the role they use."""

from .base import Page
from .containers import Containers
from .conversations import Conversations
from .files import Files
from .jobs import EventLogs, Jobs
from .responses import Responses
from .retention import Retention
from .secrets import Secrets
from .sqlstore import Lifecycle, SQLStore, Store, open_store
from .vector_stores import VectorStores

__all__ = ["Containers", "Conversations", "Files", "EventLogs", "Jobs", "Lifecycle", "Page", "Responses", "Retention",
           "SQLStore", "Secrets", "Store", "VectorStores", "open_store"]
