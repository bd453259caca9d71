"""The store's tables, as the migrations that make them, and the names the role modules share.

Rows: `responses` (the final object as JSON) and `items` (each response's input items and output items, in
order); `conversations` and `conversation_items`; `rg_secrets`; the background columns of `responses` and
`response_events` (a background response's event log). `rg_schema` records the versions applied.

Migrations are applied in order, once each, by whichever process starts first (the engines take a lock), and
never edited once released: a change is a new migration at the end. A new role adds its tables here (a new
migration) and, when its rows have an owner, their table to OWNED_TABLES so that re-keyed owners follow.
"""

from __future__ import annotations

MIGRATIONS: list[list[str]] = [
    [  # 1: responses and their items
        """CREATE TABLE responses (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            previous_response_id TEXT,
            created_at BIGINT NOT NULL,
            expires_at BIGINT NOT NULL,
            deleted INTEGER NOT NULL DEFAULT 0,
            body TEXT NOT NULL
        )""",
        "CREATE INDEX responses_expires_at ON responses (expires_at)",
        """CREATE TABLE items (
            response_id TEXT NOT NULL,
            part INTEGER NOT NULL,
            position INTEGER NOT NULL,
            id TEXT NOT NULL,
            owner TEXT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (response_id, part, position)
        )""",
        "CREATE INDEX items_id ON items (id)",
    ],
    [  # 2: conversations and their items, in append order
        """CREATE TABLE conversations (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            metadata TEXT NOT NULL
        )""",
        """CREATE TABLE conversation_items (
            conversation_id TEXT NOT NULL,
            position BIGINT NOT NULL,
            id TEXT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (conversation_id, position)
        )""",
        "CREATE INDEX conversation_items_id ON conversation_items (conversation_id, id)",
    ],
    [  # 3: secrets the replicas must share (the compaction key when none is configured)
        "CREATE TABLE rg_secrets (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ],
    [  # 4: background responses: status, the lease of the replica running it, cancel flag, event log (a row
        # holds a run of frames, seq .. last_seq: one row per flush, not one per event)
        "ALTER TABLE responses ADD COLUMN status TEXT",
        "ALTER TABLE responses ADD COLUMN worker TEXT",
        "ALTER TABLE responses ADD COLUMN lease_until BIGINT",
        "ALTER TABLE responses ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX responses_lease ON responses (lease_until)",
        """CREATE TABLE response_events (
            response_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            last_seq INTEGER NOT NULL,
            created_at BIGINT NOT NULL,
            frames TEXT NOT NULL,
            PRIMARY KEY (response_id, seq)
        )""",
        "CREATE INDEX response_events_created_at ON response_events (created_at)",
    ],
]


# Tables with an `owner` column: `reown` moves their rows from an old owner id to a new one.
OWNED_TABLES = ("responses", "items", "conversations")

# A background response still running (its row exists since it was queued): not chainable yet, leased.
ACTIVE = "('queued', 'in_progress')"

# items.part: a response's input items, then its output items
INPUT, OUTPUT = 0, 1
