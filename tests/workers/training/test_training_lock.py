"""Two processes training the same corpus into the same folder at once: the second waits, nothing is mixed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from workers.corpora import TextSource
from workers.training.ibase import IBaseRequest, train_instance_base
from workers.training.workdir import training_lock

REPO = Path(__file__).resolve().parents[3]

TRAINER = textwrap.dedent("""
    import logging, sys, time
    from pathlib import Path
    from workers.corpora import TextSource
    from workers.training.ibase import IBaseRequest, train_instance_base

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    text, out, started, release = sys.argv[1:5]

    def progress(stage, done, total):
        if stage == "partitions" and done == 0:  # mid-training, work folder full: hold on until released
            Path(started).touch()
            deadline = time.time() + 120
            while release != "-" and not Path(release).exists() and time.time() < deadline:
                time.sleep(0.1)

    info = train_instance_base(IBaseRequest(TextSource(name="c", path=text), "mistral", out, memory_gb=0.002),
                               progress=progress)
    print(info.sha256, info.partitions, time.time(), flush=True)
""")


def _start(text: Path, out: Path, started: Path, release: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", TRAINER, str(text), str(out), str(started), release],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path: Path, proc: subprocess.Popen, timeout_s: float = 300) -> None:
    deadline = time.time() + timeout_s
    while not path.exists():
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        assert time.time() < deadline, f"{path.name} never appeared"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_second_training_of_the_same_file_waits_for_the_first(tmp_path):
    text = tmp_path / "c.txt"
    import pydoc_data.topics

    topics = pydoc_data.topics.topics
    text.write_text("\n\n".join(topics[k] for k in sorted(topics))[:60_000])
    out = tmp_path / "out"
    first = _start(text, out, tmp_path / "a-started", str(tmp_path / "release"))
    _wait_for(tmp_path / "a-started", first)  # the first is mid-build, its lock held
    second = _start(text, out, tmp_path / "b-started", "-")
    waited = ""
    for line in second.stderr:  # the second says whom it waits for, then blocks
        if "is being trained by" in line:
            waited = line
            break
    assert f"pid {first.pid} on " in waited, waited
    assert not (tmp_path / "b-started").exists()  # it has not touched the work folder
    (tmp_path / "release").touch()
    a_out, a_err = first.communicate(timeout=300)
    b_out, b_err = second.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, (a_err[-2000:], b_err[-2000:])
    (a_sha, a_parts, a_end), (b_sha, _, b_end) = a_out.split(), b_out.split()
    assert int(a_parts) >= 2 and float(b_end) > float(a_end)
    ref = train_instance_base(
        IBaseRequest(TextSource(name="c", path=str(text)), "mistral", tmp_path / "ref")
    )  # in memory, alone
    assert a_sha == b_sha == ref.sha256
    assert [p.name for p in out.iterdir()] == [Path(ref.path).name]  # no work folder, no lock file left


def test_the_lock_of_a_killed_holder_is_taken_over(tmp_path):
    target = tmp_path / "x.igtree"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from workers.training.workdir import training_lock
        with training_lock(Path({str(target)!r})):
            print("held", flush=True)
            time.sleep(600)
    """),
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    holder.kill()  # kill -9: the kernel drops its flock, its lock file stays behind
    holder.wait()
    assert (tmp_path / ".x.igtree.lock").exists()
    with training_lock(target):
        assert (tmp_path / ".x.igtree.lock").read_text().startswith(f"pid {os.getpid()} on ")
    assert not (tmp_path / ".x.igtree.lock").exists()
