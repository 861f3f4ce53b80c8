"""A throwaway PostgreSQL server for the tests and the benchmarks: `PgCluster(folder)` runs initdb and pg_ctl on a
unix socket in that folder (as the `postgres` user when run as root; no TCP, fsync off) and hands out fresh empty
databases by URL; `pg_bin` finds the server's programs (on PATH or in Debian's /usr/lib/postgresql/*/bin).

Example:
    >>> cluster = PgCluster(Path(tempfile.mkdtemp(prefix="pg-")))   # a short path: socket names are limited
    >>> url = cluster.new_database()                                 # postgresql+psycopg://postgres@/t..?host=...
    >>> cluster.close()                                              # stopped, its folder removed
"""

from __future__ import annotations

import os
import shutil


def pg_bin(name: str) -> str | None:
    import glob

    found = shutil.which(name) or sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))[-1:]
    return found if isinstance(found, str) else (found[0] if found else None)


class PgCluster:
    """A throwaway PostgreSQL cluster on a unix socket in a temp folder (run as `postgres` when we are root)."""

    def __init__(self, root):
        import subprocess

        self.root, self.data, self.sock = root, root / "data", root / "sock"
        self.sock.mkdir()
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            subprocess.run(["chown", "-R", self.user, str(root)], check=True)
            os.chmod(root, 0o755)
        self._as_user(
            [pg_bin("initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"]
        )
        self._as_user(
            [
                pg_bin("pg_ctl"),
                "-D",
                str(self.data),
                "-l",
                str(root / "log"),
                "-w",
                "-t",
                "60",
                "-o",
                f"-k {self.sock} -c listen_addresses='' -c fsync=off -c max_connections=200",
                "start",
            ]
        )
        self.n = 0

    def _as_user(self, cmd: list[str]) -> None:
        import subprocess

        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def url(self, db: str) -> str:
        return f"postgresql+psycopg://postgres@/{db}?host={self.sock}"

    def new_database(self) -> str:
        """A fresh empty database's URL."""
        import psycopg

        self.n += 1
        name = f"t{os.getpid()}_{self.n}"
        with psycopg.connect(f"host={self.sock} user=postgres dbname=postgres", autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        self._as_user([pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"])

    def close(self) -> None:
        """Stop the server and remove its folder (~125 MB of data otherwise left behind)."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
