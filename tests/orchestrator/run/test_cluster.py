"""A two-node Ray cluster started the way users start one, by the commands of the docs' Clusters page as written (their
placeholders filled in, and `--block` plus small-footprint flags appended so that the test owns the processes):
the second node's artifacts folder is invisible to the head, trainings run on both nodes, instance bases reach the
accelerator's node through Ray, and killing the second node mid-training still ends with every cell done and every
generation equal to its greedy reference.

The head offers the accelerator and one CPU, the second node two CPUs in its own mount namespace with a tmpfs
over the artifacts folder (`unshare --mount`). The test stops only the processes it started, by pid.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
from sqlalchemy import select

from storage.db import open_db
from storage.models import Cell, Generation, InstanceBase
from workers.files import file_sha256

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
CORPORA = ("a", "b", "c")

NAMESPACES = pytest.mark.skipif(
    shutil.which("unshare") is None or os.geteuid() != 0, reason="needs unshare and root for a private mount namespace"
)


def cluster_commands() -> list[str]:
    """The commands of docs/clusters.md's first block: the head's `ray start`, a node's, the `greenspec` run."""
    section = (ROOT / "docs" / "clusters.md").read_text()
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def _filled(command: str, port: int, db_url: str, spec: Path) -> list[str]:
    """A docs command with its placeholders filled in for this machine."""
    command = command.replace("HEAD_IP", "127.0.0.1").replace("6379", str(port)).replace("spec.toml", str(spec))
    command = command.replace("postgresql+psycopg://greenspec@DB_HOST/greenspec", db_url)
    words = shlex.split(command)
    return [str(BIN / words[0]), *words[1:]]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(ROOT), **extra}


def _start(cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
    """A `ray start --block` in a session of its own; returns once it says the node is up."""
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "Ray runtime started" in line:
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # a full pipe would block it
            return proc
    raise AssertionError("ray start failed: " + "".join(seen[-30:]))


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL a started process and every process below it, by pid."""
    try:
        family = psutil.Process(proc.pid).children(recursive=True) + [psutil.Process(proc.pid)]
    except psutil.NoSuchProcess:
        return
    for p in family:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    proc.wait(timeout=30)


def _forget_head(port: int) -> None:
    """Remove the address file a killed `ray start --head` leaves behind (where it names this head's port): a later
    bare `ray.init()` on the machine would try to join the dead head."""
    current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
    if current.exists() and current.read_text().strip().endswith(f":{port}"):
        current.unlink()


def _spec(write_spec, text: Path, arts: Path) -> Path:
    corpora = "".join(
        f'[[corpora]]\nname = "{c}"\npath = "{text}"\nmax_tokens = {6000 + 1000 * i}\n' for i, c in enumerate(CORPORA)
    )  # three different instance bases
    olifants = "".join(f'[[strategies]]\nname = "olifant-{c}"\ndraft = "olifant"\ncorpus = "{c}"\n' for c in CORPORA)
    return write_spec(
        k=[2],
        **{
            f'[[corpora]]\nname = "pydoc"\npath = "{text}"\n': corpora,
            '[[strategies]]\nname = "olifant-pydoc"\ndraft = "olifant"\ncorpus = "pydoc"\n': olifants,
            '[[strategies]]\nname = "ngram"\ndraft = "ngram"\n': "",
            'regimes = ["uncached", "cached"]': 'regimes = ["cached"]',
            "[experiment]\n": f'[experiment]\nartifacts = "{arts}"\n',
        },
    )


def _wait_for(path: Path, driver: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert driver.poll() is None, f"the run ended before {path.name} appeared: {driver.communicate()}"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.2)


def _database(request, tmp_path: Path) -> str:
    """A fresh PostgreSQL database as the docs show, or SQLite where no PostgreSQL server can start here."""
    try:
        return request.getfixturevalue("pg_cluster").new_database()
    except pytest.skip.Exception:
        return f"sqlite:///{tmp_path / 'c.db'}"


def _wait_trained(url: str, n: int, driver: subprocess.Popen, timeout_s: float) -> None:
    """Wait until `n` train cells are done."""
    engine, Session = open_db(url, migrate=False)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            with Session() as s:
                done = s.scalars(select(Cell).where(Cell.kind == "train", Cell.state == "done")).all()
            if len(done) >= n:
                return
            assert driver.poll() is None, f"the run ended with {len(done)} trainings done: {driver.communicate()}"
            assert time.monotonic() < deadline, f"{len(done)} of {n} trainings done"
            time.sleep(0.3)
    finally:
        engine.dispose()


@pytest.mark.slow
@NAMESPACES
def test_two_nodes_without_a_shared_disk_train_and_survive_a_lost_node(request, write_spec, text_files, tmp_path):
    arts = tmp_path / "artifacts"
    arts.mkdir()
    port, url, spec = _free_port(), _database(request, tmp_path), _spec(write_spec, text_files[0], arts)
    head_cmd, node_cmd, run_cmd = (_filled(c, port, url, spec) for c in cluster_commands())
    small = ["--disable-usage-stats", "--object-store-memory=100000000", "--block"]
    head = _start([*head_cmd, "--include-dashboard=false", *small], _env())
    node = None
    try:
        marker = arts / ".train-hang"  # only the second node sees it: it lives in that node's tmpfs
        node = _start(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                f'mount -t tmpfs tmpfs "{arts}" && exec "$0" "$@"',
                *node_cmd,
                *small,
            ],
            _env(GREENSPEC_FAULT_TRAIN_HANG=str(marker)),
        )
        driver = subprocess.Popen(run_cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        node_view = Path(f"/proc/{node.pid}/root") / str(arts).lstrip("/")
        _wait_for(node_view / ".train-hang.hanging", driver, 120)  # node 2: one training done, the next one hangs
        _wait_trained(url, 2, driver, 120)  # the head's and the second node's first: stored, the file copied
        assert not (arts / ".train-hang").exists()  # the head cannot see the second node's artifacts folder
        _kill_tree(node)
        out, err = driver.communicate(timeout=240)
        assert driver.returncode == 0, err[-3000:]
    finally:
        if node is not None:
            _kill_tree(node)
        _kill_tree(head)
        _forget_head(port)
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        cells = s.scalars(select(Cell)).all()
        assert {c.state for c in cells} == {"done"}, [(c.kind, c.state, c.error) for c in cells if c.state != "done"]
        trains = [c for c in cells if c.kind == "train"]
        assert len(trains) == 3 and len({c.worker for c in trains}) == 2  # trained on both nodes
        ibases = s.scalars(select(InstanceBase)).all()
        for ib in ibases:  # every instance base is on the head now, the second node's ones copied through Ray
            assert file_sha256(ib.path) == ib.sha256
        sweeps = [c for c in cells if c.kind == "sweep" and (c.strategy or "").startswith("olifant-")]
        head_id = sweeps[0].worker.split()[0]  # cells.worker: the Ray node id, then host:pid:device
        assert len(sweeps) == 3 * 2 and all(c.worker.split()[0] == head_id for c in sweeps)
        assert head_id in {t.worker for t in trains}
        remote = {t.corpus for t in trains if t.worker != head_id}  # built on the second node, used on the head
        assert len(remote) == 1 and {c.strategy.removeprefix("olifant-") for c in sweeps} >= remote
        gens = s.scalars(select(Generation)).all()  # the sweep over two nodes is as exact as on one
        assert len(gens) == len([c for c in cells if c.kind == "sweep"]) and all(g.exact_match for g in gens)


def test_the_readme_cluster_block_holds_only_the_commands_run_above():
    commands = cluster_commands()
    assert [c.split()[:2] for c in commands] == [["ray", "start"], ["ray", "start"], ["greenspec", "--db"]]
    assert "--head" in commands[0] and "--address=HEAD_IP:6379" in commands[1]
    assert commands[2].endswith(" run spec.toml")
