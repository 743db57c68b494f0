"""A real one-node Slurm cluster for tests: munged, slurmctld and slurmd started under a temp folder, no systemd.

Debian's `slurm-wlm` and `munge` (installed by `make slurm`, as root where apt exists). Every daemon gets its own
paths under the folder (key, socket, pid, log, state, spool) and its own free loopback ports, so nothing of the
machine's is read or touched; `SLURM_CONF` in `SlurmCluster.env` points the clients and jobs at it. Accounting is
off, so job states come from `scontrol show job`. `stop()` ends exactly the daemons it started, by their pid files.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "scontrol", "squeue")
MISSING = "Slurm and munge are not installed: `make slurm` installs Debian's slurm-wlm and munge (needs apt and root)"


def missing_tools() -> list[str]:
    """The Slurm and munge programs this machine lacks."""
    paths = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin" + os.pathsep + "/sbin"
    return [tool for tool in (*DAEMONS, *CLIENTS) if shutil.which(tool, path=paths) is None]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, which has stopped but not been reaped, counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@dataclass
class SlurmCluster:
    """A running one-node cluster: its folder, the environment its clients need, and the daemons' pid files."""

    root: Path
    env: dict[str, str]
    pid_files: dict[str, Path] = field(default_factory=dict)

    def run(self, args: list[str], *, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run a client command (`sbatch`, `scontrol`, a shell line) with the cluster's environment."""
        return subprocess.run(args, cwd=cwd, env=self.env, capture_output=True, text=True, timeout=timeout,
                              check=False)

    def job_state(self, job_id: str) -> str:
        """A job's state as `scontrol show job` says it (PENDING, RUNNING, COMPLETED, FAILED, ...)."""
        shown = self.run(["scontrol", "show", "job", job_id]).stdout
        found = re.search(r"JobState=(\S+)", shown)
        return found.group(1) if found else "UNKNOWN"

    def wait_for(self, job_id: str, *, timeout: float = 240) -> str:
        """Wait until the job has ended; return its final state (or the last one seen at the timeout)."""
        deadline = time.monotonic() + timeout
        state = self.job_state(job_id)
        while state in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING") and time.monotonic() < deadline:
            time.sleep(0.5)
            state = self.job_state(job_id)
        return state

    def pids(self) -> dict[str, int]:
        """The pid of each daemon started, from its pid file."""
        found = {}
        for name, path in self.pid_files.items():
            with contextlib.suppress(OSError, ValueError):
                found[name] = int(path.read_text().split()[0])
        return found

    def stop(self) -> None:
        """Stop every daemon this cluster started: `scontrol shutdown`, then SIGTERM by pid file, then SIGKILL."""
        pids = self.pids()
        self.run(["scontrol", "shutdown"], timeout=20)
        for name in ("slurmd", "slurmctld", "munged"):
            pid = pids.get(name)
            if pid is None:
                continue
            deadline = time.monotonic() + 10
            while _alive(pid) and time.monotonic() < deadline:
                if name == "munged" or time.monotonic() > deadline - 5:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGTERM)
                time.sleep(0.2)
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def running(self) -> list[str]:
        """The daemons of this cluster still running."""
        return [name for name, pid in self.pids().items() if _alive(pid)]


def _conf(root: Path, host: str, cpus: int, memory: int, ports: tuple[int, int], munge_socket: Path) -> str:
    return "\n".join([
        "ClusterName=speedbench-test",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ports[0]}",
        f"SlurmdPort={ports[1]}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        "MpiDefault=none",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SlurmdParameters=config_overrides",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'run' / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
        "ReturnToService=2",
        "SchedulerType=sched/backfill",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory} State=UNKNOWN",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        "",
    ])


def _memory_mb() -> int:
    done = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30, check=False)
    found = re.search(r"RealMemory=(\d+)", done.stdout)
    return int(found.group(1)) if found else 1024


@contextlib.contextmanager
def one_node_cluster(cpus: int = 4, *, timeout: float = 30) -> Iterator[SlurmCluster]:
    """Start munged, slurmctld and slurmd under a new temp folder; yield the cluster once its node is idle; stop
    every daemon after, however the block ends.

    The node declares `cpus` CPUs (`SlurmdParameters=config_overrides`), at least this machine's, so that one job
    of that many tasks runs at once here as it would on a cluster's node."""
    root = Path(tempfile.mkdtemp(prefix="speedbench-slurm-"))
    root.chmod(0o755)  # munged refuses a socket folder others cannot traverse
    for part in ("munge", "state", "spool", "run", "log"):
        (root / part).mkdir(mode=0o755)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    munge_socket = root / "munge" / "munge.socket"
    host = socket.gethostname().split(".")[0]
    ports = (_free_port(), _free_port())
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, host, max(cpus, os.cpu_count() or 1), _memory_mb(), ports, munge_socket))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    env["PATH"] = env.get("PATH", "") + os.pathsep + "/usr/sbin" + os.pathsep + "/sbin"
    cluster = SlurmCluster(root, env, {"munged": root / "run" / "munged.pid",
                                       "slurmctld": root / "run" / "slurmctld.pid",
                                       "slurmd": root / "run" / "slurmd.pid"})
    try:
        _start(cluster, ["munged", "--key-file", str(key), "--socket", str(munge_socket), "--pid-file",
                         str(cluster.pid_files["munged"]), "--log-file", str(root / "log" / "munged.log"),
                         "--seed-file", str(root / "munge" / "munged.seed")])
        _start(cluster, ["slurmctld"])
        _start(cluster, ["slurmd"])
        _wait_idle(cluster, host, timeout)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def _start(cluster: SlurmCluster, args: list[str]) -> None:
    """Start one daemon (it forks into the background and writes its pid file); raise with its log if it fails."""
    done = cluster.run(args, timeout=30)
    name = args[0]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and name not in cluster.pids():
        time.sleep(0.1)
    if done.returncode != 0 or name not in cluster.pids():
        log = cluster.root / "log" / f"{name}.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(f"{name} did not start (exit {done.returncode}): {done.stderr.strip()} {tail}")


def _wait_idle(cluster: SlurmCluster, host: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    shown = ""
    while time.monotonic() < deadline:
        shown = cluster.run(["scontrol", "show", "node", host]).stdout
        if re.search(r"State=IDLE", shown):
            return
        time.sleep(0.3)
    raise RuntimeError(f"the Slurm node did not come up idle in {timeout:.0f} s: {shown.strip()[:500]}")
