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
    [  # 5: the Files API (store/files.py): a row per file; its bytes beside the SQLite file, or in
        # rg_file_parts (1 MiB parts) on PostgreSQL, so that every replica serves every file
        """CREATE TABLE rg_files (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            expires_at BIGINT,
            bytes BIGINT NOT NULL,
            purpose TEXT NOT NULL,
            body TEXT NOT NULL
        )""",
        "CREATE INDEX rg_files_owner ON rg_files (owner, created_at, id)",
        "CREATE INDEX rg_files_expires_at ON rg_files (expires_at)",
        """CREATE TABLE rg_file_parts (
            file_id TEXT NOT NULL,
            part INTEGER NOT NULL,
            created_at BIGINT NOT NULL,
            data BYTEA NOT NULL,
            PRIMARY KEY (file_id, part)
        )""",
    ],
    [  # 6: vector stores (tools/file_search/store.py): the stores, their files (each file's row is also its
        # ingestion job: status, the worker holding it and its lease), file batches, and the chunks with their
        # embeddings (float32 bytes). The keyword index is the engine's own (FTS5 or a GIN index), made by
        # vector_stores.SEARCH_INDEX after these migrations.
        """CREATE TABLE rg_vector_stores (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            last_active_at BIGINT NOT NULL,
            expires_at BIGINT,
            embedding_model TEXT,
            dimension INTEGER,
            version BIGINT NOT NULL DEFAULT 0,
            body TEXT NOT NULL
        )""",
        "CREATE INDEX rg_vector_stores_owner ON rg_vector_stores (owner, created_at, id)",
        "CREATE INDEX rg_vector_stores_expires_at ON rg_vector_stores (expires_at)",
        """CREATE TABLE rg_vector_store_files (
            vector_store_id TEXT NOT NULL,
            file_id TEXT NOT NULL,
            owner TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            seq BIGINT NOT NULL,
            status TEXT NOT NULL,
            batch_id TEXT,
            attributes TEXT,
            chunking TEXT NOT NULL,
            last_error TEXT,
            usage_bytes BIGINT NOT NULL DEFAULT 0,
            worker TEXT,
            lease_until BIGINT,
            attempts INTEGER NOT NULL DEFAULT 0,
            PRIMARY KEY (vector_store_id, file_id)
        )""",
        "CREATE INDEX rg_vector_store_files_jobs ON rg_vector_store_files (status, lease_until)",
        "CREATE INDEX rg_vector_store_files_file ON rg_vector_store_files (file_id)",
        "CREATE INDEX rg_vector_store_files_batch ON rg_vector_store_files (batch_id)",
        """CREATE TABLE rg_file_batches (
            id TEXT PRIMARY KEY,
            vector_store_id TEXT NOT NULL,
            owner TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            cancelled INTEGER NOT NULL DEFAULT 0
        )""",
        """CREATE TABLE rg_chunks (
            vector_store_id TEXT NOT NULL,
            file_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            start_index BIGINT NOT NULL,
            end_index BIGINT NOT NULL,
            tokens INTEGER NOT NULL,
            text TEXT NOT NULL,
            embedding BYTEA,
            PRIMARY KEY (vector_store_id, file_id, position)
        )""",
    ],
    [  # 7: code interpreter containers and their files (tools/code_interpreter/store.py); BYTEA is a BLOB to SQLite
        """CREATE TABLE containers (
            id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            name TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            last_active_at BIGINT NOT NULL,
            minutes INTEGER NOT NULL,
            memory_limit TEXT NOT NULL,
            status TEXT NOT NULL,
            generation BIGINT NOT NULL,
            worker TEXT
        )""",
        "CREATE INDEX containers_owner ON containers (owner, created_at)",
        "CREATE INDEX containers_active ON containers (status, last_active_at)",
        """CREATE TABLE container_files (
            id TEXT PRIMARY KEY,
            container_id TEXT NOT NULL,
            path TEXT NOT NULL,
            bytes BIGINT NOT NULL,
            created_at BIGINT NOT NULL,
            source TEXT NOT NULL,
            etag TEXT NOT NULL,
            content BYTEA NOT NULL
        )""",
        "CREATE UNIQUE INDEX container_files_path ON container_files (container_id, path)",
    ],
]


# Tables with an `owner` column: `reown` moves their rows from an old owner id to a new one.
OWNED_TABLES = ("responses", "items", "conversations", "rg_files", "rg_vector_stores", "rg_vector_store_files",
                "rg_file_batches", "containers")

# A background response still running (its row exists since it was queued): not chainable yet, leased.
ACTIVE = "('queued', 'in_progress')"

# items.part: a response's input items, then its output items
INPUT, OUTPUT = 0, 1
