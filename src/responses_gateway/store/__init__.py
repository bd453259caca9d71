"""The response store, split by role (see sqlstore.py): callers type their parameter with the role they use."""

from .base import Page
from .conversations import Conversations
from .files import Files
from .jobs import EventLogs, Jobs
from .responses import Responses
from .retention import Retention
from .secrets import Secrets
from .sqlstore import Lifecycle, Roles, SQLStore, Store, open_store

__all__ = ["Conversations", "Files", "EventLogs", "Jobs", "Lifecycle", "Page", "Responses", "Retention", "Roles",
           "SQLStore", "Secrets", "Store", "open_store"]
