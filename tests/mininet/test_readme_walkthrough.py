"""The README's "Try it in Mininet" runs as written, and the traps it used to fall into stay shut.

The walkthrough test reads the fenced block between ``<!-- walkthrough:start -->``
and ``<!-- walkthrough:end -->`` in README.md and runs it with bash, line for
line, against a stack started as ``make run`` starts one (``flowlane up``, the
shipped default policy) on free ports. The block takes the ports the way a
reader would change them: ``$FLOWLANE_API`` (the CLI's own variable),
``$FLOWLANE_TOKEN_FILE`` and ``$OFP_PORT`` (``make run``'s name); ``PATH`` is
given without the venv, so the block's own ``export`` must put ``flowlane``
on it.

The traps, each once a failure of the walkthrough:

- ``mn --custom`` exec's the file without ``__file__`` (then ran Mininet's
  machine-wide cleanup, which deletes every OVS bridge);
- TCP through the userspace datapath stalls unless TX checksum offload is off
  on the hosts' interfaces (ping works, iperf3 never connects);
- a fresh fabric drops packets until the controller has discovered it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from flowlane_bench import harness
from flowlane_bench.topologies import DumbbellTopo, LeafSpineTopo, OffloadOffHost
from mininet.net import Mininet
from mininet.node import Host

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
TOPOLOGIES = REPO / "mininet" / "topologies.py"
START, END = "<!-- walkthrough:start -->", "<!-- walkthrough:end -->"
WALKTHROUGH_BRIDGES = ("leaf1", "leaf2", "spine1", "spine2", "s1", "s2", "s3")
"""The bridges of the README's ``flowlane-leafspine,2,2,2`` and ``linear,3``: nothing else may
hold them."""
NETWORKS = 2
"""``mn`` runs in the walkthrough, each ending with a pingall and an iperf3."""
WALKTHROUGH_TIMEOUT_S = 180.0
MIN_IPERF3_MBITS = 30.0
"""One TCP flow over three 100 Mbit hops of the userspace datapath (about 90 measured here)."""
MAX_READY_S = 10.0
"""The README promises a fabric forwards a few seconds after its switches connect."""


# ---- helpers ---------------------------------------------------------------------------------


def walkthrough(readme: str) -> str:
    """The shell lines of every ``sh`` block between walkthrough markers, in README order."""
    sections = re.findall(f"{re.escape(START)}(.*?){re.escape(END)}", readme, flags=re.DOTALL)
    if not sections:
        raise AssertionError(f"README.md has no {START} ... {END} section")
    blocks = [
        block
        for section in sections
        for block in re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    ]
    if len(blocks) != len(sections):
        raise AssertionError("every walkthrough section of the README must hold one ```sh block")
    return "\n".join(blocks)


def mn_python() -> str:
    """The interpreter ``mn`` runs under (its shebang): Debian's, without the venv."""
    mn = shutil.which("mn")
    if mn is None:
        raise harness.PrerequisiteError("missing mn (Debian's mininet package: run `make setup`)")
    shebang = Path(mn).read_text().splitlines()[0]
    return shebang.removeprefix("#!").split()[0]


def bridges() -> set[str]:
    listed = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True, check=True)
    return set(listed.stdout.split())


def features(host: Host, intf: str) -> str:
    return str(host.cmd(f"ethtool -k {intf}"))


def without_venv(path: str) -> str:
    venv_bin = str(REPO / ".venv" / "bin")
    return os.pathsep.join(entry for entry in path.split(os.pathsep) if entry != venv_bin)


@contextlib.contextmanager
def two_hosts(host_class: type[Host]) -> Iterator[tuple[Host, Host]]:
    """Two hosts joined by a veth, no switch: enough to see what a host class does to its links."""
    net = Mininet(host=host_class, controller=None, build=False)
    first, second = net.addHost("wtA", ip="10.9.0.1/24"), net.addHost("wtB", ip="10.9.0.2/24")
    net.addLink(first, second)
    try:
        net.build()
        yield first, second
    finally:
        net.stop()


# ---- the traps, one by one ------------------------------------------------------------------


def test_topologies_load_the_way_mn_loads_them() -> None:
    """``mn --custom`` exec's the file with an empty namespace (no ``__file__``), under Debian's
    Python; before, this raised ``NameError: name '__file__' is not defined``."""
    script = (
        "import sys\n"
        "customs = {}\n"
        f"exec(compile(open({str(TOPOLOGIES)!r}).read(), 'mininet/topologies.py', 'exec'),"
        " customs, customs)\n"
        "print(sorted(customs['topos']), sorted(customs['hosts']), sorted(customs['tests']),"
        " callable(customs['cleanup']))\n"
    )
    done = subprocess.run(
        [mn_python(), "-c", script], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == (
        "['flowlane-dumbbell', 'flowlane-leafspine', 'flowlane-single'] ['offload-off']"
        " ['fabric-ready', 'iperf3'] True"
    )


def test_the_flowlane_topologies_give_every_host_offload_off() -> None:
    """Without ``--host``, the README's topologies already make hosts that TCP can use."""
    for topo in (DumbbellTopo(2, 2), LeafSpineTopo(2, 2, 2)):
        classes = {name: topo.nodeInfo(name).get("cls") for name in topo.hosts()}
        assert classes and set(classes.values()) == {OffloadOffHost}, classes


@pytest.mark.mininet
def test_the_offload_off_host_turns_tx_checksumming_off() -> None:
    """``--host offload-off`` (and harness.network) turn TX checksum offload off on every link
    of a host; a plain Mininet host leaves it on, which is what stalls TCP through OVS."""
    harness.check_prerequisites()
    with two_hosts(Host) as (plain, _):
        assert "tx-checksumming: on" in features(plain, "wtA-eth0")
    with two_hosts(OffloadOffHost) as (first, second):
        assert "tx-checksumming: off" in features(first, "wtA-eth0")
        assert "tx-checksumming: off" in features(second, "wtB-eth0")
        assert "1 received" in first.cmd("ping -c1 -W1 10.9.0.2")


def run_mn(*args: str) -> subprocess.CompletedProcess[str]:
    """``mn`` with this file, OVS's userspace datapath and no controller (the bridges learn)."""
    return subprocess.run(
        ["mn", "--custom", "mininet/topologies.py", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.mininet
def test_tcp_crosses_the_userspace_datapath_only_from_offload_off_hosts() -> None:
    """The trap itself, through a plain ``mn``: with Mininet's hosts ping works and iperf3 never
    connects (``--test iperf3`` then ends ``mn`` with status 1 after stopping its network);
    with ``--host offload-off`` TCP runs at full speed."""
    harness.check_prerequisites()
    taken = sorted(bridges() & {"s1", "s2"})
    if taken:
        raise harness.PrerequisiteError(f"bridges {', '.join(taken)} exist already")
    common = ["--topo", "linear,2", "--switch", "ovs,datapath=user,failMode=standalone"]
    common += ["--controller", "none", "--test", "pingall+iperf3"]
    plain = run_mn(*common)
    output = plain.stdout + plain.stderr
    assert "*** Results: 0% dropped (2/2 received)" in output, output
    assert "*** iperf3 h1 -> h2 failed: unable to connect to server" in output, output
    assert plain.returncode == 1, output
    assert not bridges() & {"s1", "s2"}, output  # stopped before exiting
    fixed = run_mn("--host", "offload-off", *common)
    output = fixed.stdout + fixed.stderr
    assert fixed.returncode == 0, output
    rate = re.search(r"\*\*\* iperf3 h1 -> h2: ([\d.]+) Mbit/s", output)
    assert rate is not None and float(rate.group(1)) >= 100, output


@pytest.mark.mininet
@pytest.mark.parametrize(
    "topology",
    [["--topo", "flowlane-dumbbell,1,1"], ["--topo", "linear,2", "--host", "offload-off"]],
    ids=["flowlane-topology", "mininet-topology"],
)
def test_a_failing_mn_cleans_up_its_own_run_only(topology: list[str]) -> None:
    """When ``mn`` fails (here: an unknown ``--test``) it runs its cleanup; with this file loaded
    that is ``topologies.cleanup``: this run's bridges and hosts go, another bridge stays.
    Mininet's own would have deleted every bridge on the machine (not run here, for that reason)."""
    harness.check_prerequisites()
    own = {"s1", "s2"}
    taken = sorted(bridges() & (own | {"wtkeep"}))
    if taken:
        raise harness.PrerequisiteError(f"bridges {', '.join(taken)} exist already")
    subprocess.run(
        ["ovs-vsctl", "add-br", "wtkeep", "--", "set", "bridge", "wtkeep", "datapath_type=netdev"],
        check=True,
    )
    try:
        done = run_mn(
            *topology,
            "--switch",
            "ovs,datapath=user,failMode=standalone",  # connected with no controller
            "--controller",
            "none",
            "--test",
            "no-such-test",
        )
        output = done.stdout + done.stderr
        assert "Test no-such-test is unknown" in output, output
        assert "flowlane's cleanup: stopped this run's hosts and deleted bridges s1 s2" in output
        assert "Cleanup complete" not in output, output  # Mininet's own did not run
        present = bridges()
        assert "wtkeep" in present, output
        assert not own & present, output
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        assert not re.search(r"\bs[12]-eth\d", links), links
    finally:
        for bridge in ("wtkeep", *own):
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", bridge], check=False)


# ---- the walkthrough itself -----------------------------------------------------------------


@pytest.mark.mininet
def test_the_readme_walkthrough_runs_as_written(tmp_path: Path) -> None:
    harness.check_prerequisites()
    if shutil.which("redis-server") is None:
        raise harness.PrerequisiteError("missing redis-server (run `make setup`)")
    taken = sorted(bridges() & set(WALKTHROUGH_BRIDGES))
    if taken:
        raise harness.PrerequisiteError(
            f"bridges {', '.join(taken)} exist already: another Mininet holds them, or a crashed"
            " one left them (`ovs-vsctl del-br NAME`)"
        )
    script = walkthrough(README.read_text())
    ofp_port = harness.free_port()
    log = tmp_path / "stack.log"
    started = time.monotonic()
    with harness.stack(REPO / "policies" / "default.yaml", log, ofp_port) as stack:
        env = {
            **os.environ,
            "PATH": without_venv(os.environ["PATH"]),
            "FLOWLANE_API": stack.api,
            "FLOWLANE_TOKEN_FILE": str(log.with_name("admin-token")),
            "OFP_PORT": str(ofp_port),
        }
        env.pop("FLOWLANE_TOKEN", None)
        shell = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            transcript, _ = shell.communicate(timeout=WALKTHROUGH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            # Ctrl-C, as a reader would: mn stops its own network (topologies.cleanup).
            os.killpg(shell.pid, signal.SIGINT)
            transcript, _ = shell.communicate(timeout=30)
            transcript += f"\n[timed out after {WALKTHROUGH_TIMEOUT_S:g} s]"
        finally:
            if shell.poll() is None:
                os.killpg(shell.pid, signal.SIGKILL)
                shell.wait()
            leftover = sorted(bridges() & set(WALKTHROUGH_BRIDGES))
            for bridge in leftover:
                subprocess.run(["ovs-vsctl", "--if-exists", "del-br", bridge], check=False)
        stack_log = stack.log()
    took = time.monotonic() - started
    print(f"\n--- the walkthrough ({took:.1f} s with the stack) ---\n{transcript}")
    context = f"{transcript}\n--- stack log (tail) ---\n{stack_log[-8000:]}"
    assert shell.returncode == 0, context
    assert not leftover, f"the walkthrough left bridges behind (deleted now): {leftover}"

    assert "flowlane policy" in script and "policies/examples/mininet.yaml" in script
    assert re.search(r"version 2\b", transcript), context  # the Mininet policy got stored
    ready = [float(took) for took in re.findall(r"fabric ready after ([\d.]+) s", transcript)]
    assert len(ready) == NETWORKS and max(ready) <= MAX_READY_S, context
    assert transcript.count("*** Results: 0% dropped") == NETWORKS, context
    rates = re.findall(r"\*\*\* iperf3 (\S+) -> (\S+): ([\d.]+) Mbit/s", transcript)
    assert len(rates) == NETWORKS, context
    assert all(float(mbits) >= MIN_IPERF3_MBITS for _, _, mbits in rates), context
    # The example policy's detection and placement act at Mininet's rates: the leaf-spine's
    # iperf3 (h1 to h4, port 5201) became training on the switches it crossed and was pinned.
    assert re.search(
        r"reclassified .* 10\.0\.0\.1:\d+ > 10\.0\.0\.4:5201: inference -> training", transcript
    ), context
    assert re.search(r"placement .* 10\.0\.0\.1:\d+ > 10\.0\.0\.4:5201 +pinned", transcript), (
        context
    )
    assert not harness.log_problems(stack_log), context
