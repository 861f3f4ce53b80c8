"""A sweep over a two-node Ray cluster: training on either node, the accelerator worker only where the
`accelerator` resource is. (Killing the driver mid-sweep and resuming: test_reliability_processes.py and, at
random moments, test_chaos.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from storage.db import open_db
from storage.models import Generation

pytestmark = pytest.mark.slow  # a real sweep in a subprocess

ROOT = Path(__file__).resolve().parents[3]


CLUSTER_SCRIPT = """
import sys, ray
from ray.cluster_utils import Cluster
from orchestrator.run.driver import RunOptions, run_spec_file
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
cluster.add_node(num_cpus=1, resources={"accelerator": 1})   # only this node can host the accelerator worker
ray.init(address=cluster.address, log_to_driver=False)
report = run_spec_file(sys.argv[1], RunOptions(db_url=sys.argv[2], address=cluster.address))
nodes = {n["NodeID"]: n["Resources"] for n in ray.nodes()}
print("COUNTS", report.counts, "NODES", len(nodes))
ray.shutdown()
cluster.shutdown()
"""


def test_two_node_cluster(tmp_path, write_spec):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    out = subprocess.run(
        [sys.executable, "-c", CLUSTER_SCRIPT, str(write_spec(k=[2])), url],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "'failed': 0" in out.stdout and "'pending': 0" in out.stdout and "NODES 2" in out.stdout
    _, Session = open_db(url, migrate=False)
    with Session() as s:
        gens = s.scalars(select(Generation)).all()
        assert len(gens) == 3 * 2 * 2 and all(g.exact_match for g in gens)
