"""file_search (docs/file-search.md): the Files and Vector Stores APIs, ingestion, keyword and hybrid search,
and the `file_search` tool with its citations.

- `kit`: the declaration and `file_search_call` items (pure); `settings`: its settings group; `service`:
  the process's embedder, vector cache, searcher and ingestor; `runner`: one response's searches;
- `files_api`, `vector_stores_api`: the HTTP APIs; `store`: the vector stores' SQL (bound to the store's engine);
- `extract`, `pdf`, `chunking`, `embeddings`, `ingest`: a file becomes chunks; `search`, `vectors`, `ranking`,
  `filters`: chunks are found; `citations`: the answer's markers become `file_citation` annotations.
"""

NAME = "file_search"
