"""The response store, split by role (see sqlstore.py): callers type their parameter with the role they use."""

from .base import Page
from .conversations import Conversations
from .jobs import EventLogs, Jobs
from .responses import Responses
from .retention import Retention
from .secrets import Secrets
from .sqlstore import Lifecycle, SQLStore, Store, open_store

__all__ = ["Conversations", "EventLogs", "Jobs", "Lifecycle", "Page", "Responses", "Retention", "SQLStore",
           "Secrets", "Store", "open_store"]
