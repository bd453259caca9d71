"""The code_interpreter kit (tools/frame.py): Python run by the gateway in a sandbox, in stateful containers.

- `kit`: the `{"type": "code_interpreter", "container": ...}` declaration, `code_interpreter_call` items,
  what upstreams and clients see of them (pure, cheap: every request with the tool uses it);
- `runner.CodeRunner`: one response's calls — the code streamed as the model writes it, then run in the
  response's container; `annotate`: `container_file_citation` for the files the answer links;
- `settings`: its settings group; `service.CodeInterpreter`: the process's containers (made at start-up, the
  sandbox tried once); `containers_api`: the Containers API; `store`: the containers' SQL;
- `registry.Registry`: the live containers of this process (a worker each), their idle expiry, the
  per-key and global caps, and their files in the shared store (so another replica can restart one);
- `channel.Interpreter`: one worker — cells, interrupts, limits; `worker.py`: the worker itself, run inside
  the sandbox; `files`: the container's /mnt/data as the gateway reads and writes it (never following a link
  the code made);
- `sandbox`: the backend protocol and the limits; `bubblewrap` (the default), `unsandboxed` (development
  only); `seccomp`: the sandbox's system call filter.

docs/code-interpreter.md has the threat model.
"""

NAME = "code_interpreter"
