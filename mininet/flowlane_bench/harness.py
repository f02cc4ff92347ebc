"""Run flowlane against real OVS in Mininet: controller process, readiness, diagnostics, cleanup.

Waits poll for the state that matters (the planned flows on the switch, the
queues on the ports) instead of sleeping, and every process it starts is
stopped by PID.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import OVSSwitch, RemoteController
from mininet.topo import Topo

from controller.pipeline.flows import Owner, cookie_owner
from controller.pipeline.plan import PortState, SwitchInputs, plan
from controller.policy.jobs import JobSpec
from controller.policy.load import load_policy_file
from controller.policy.model import Policy
from controller.qos import tc
from controller.qos.ovsdb import Ovsdb
from controller.qos.plan import tc_filters
from flowlane_bench.nodes import Net, Node
from flowlane_bench.processes import stop_process as stop_process  # harness.stop_process
from flowlane_bench.topologies import OffloadOffHost

REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
SOCKET_BUFFERS = {"rmem_default": 8 * 1024 * 1024, "wmem_default": 16 * 1024 * 1024}
"""Buffers of the userspace datapath's packet sockets; deploy/start-ovs.sh says why."""
FABRIC_OWNERS = frozenset({Owner.FORWARDING, Owner.PLACEMENT, Owner.DISCOVERY})
"""Entries a fabric controller derives from what it discovered, not from the policy alone."""

HOST_CONGESTION_CONTROL = "cubic"
"""TCP congestion control of every Mininet host (see ``network``)."""
REQUIRED_TOOLS = ("ovs-vsctl", "ovs-ofctl", "ovs-vswitchd", "tc", "ethtool", "iperf3", "mnexec")


def module_command(module: str, *args: str) -> list[str]:
    """``python -m flowlane_bench.MODULE ARGS``: how a benchmark script starts (in a host too)."""
    return [PYTHON, "-m", f"flowlane_bench.{module}", *args]


class PrerequisiteError(RuntimeError):
    """Something the end-to-end run needs is missing; the message says what and how to fix it."""


def check_prerequisites() -> None:
    """Fail loudly (never skip) when the machine cannot run the scenario."""
    problems = []
    if os.geteuid() != 0:
        problems.append("must run as root (Mininet creates namespaces and veths)")
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    if missing:
        problems.append(f"missing tools: {', '.join(missing)} (run `make setup`)")
    elif subprocess.run(["ovs-vsctl", "--timeout=3", "show"], capture_output=True).returncode:
        problems.append("Open vSwitch is not running (run deploy/start-ovs.sh)")
    problems += socket_buffer_problems()
    if problems:
        raise PrerequisiteError("; ".join(problems))


def socket_buffer_problems() -> list[str]:
    """Why the userspace datapath would lose packets before any queue, if it would."""
    problems = []
    for name, wanted in SOCKET_BUFFERS.items():
        value = int(Path(f"/proc/sys/net/core/{name}").read_text())
        if value < wanted:
            problems.append(f"net.core.{name} is {value}, below {wanted}")
    sockets = subprocess.run(["ss", "-0", "-m", "-p"], capture_output=True, text=True).stdout
    for line in sockets.splitlines():
        match = re.search(r"tb(\d+)", line)
        if '"ovs-vswitchd"' in line and match and int(match[1]) < SOCKET_BUFFERS["wmem_default"]:
            problems.append(f"ovs-vswitchd sends through a {match[1]}-byte socket buffer")
    if problems:
        problems[-1] += (
            " (the userspace datapath would drop packets before any queue: run deploy/start-ovs.sh)"
        )
    return problems


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORT_SPAN = 12_000
"""How far below the kernel's ephemeral range ports are drawn."""


def free_port() -> int:
    """A free loopback port below the kernel's ephemeral range.

    Outside that range no outgoing connection takes the port between now and its use:
    neither the sockets of the fast tier, which runs beside the OVS tier, nor a switch
    reconnecting to a dead controller on loopback, whose source port can be the very port
    it dials (a TCP self-connect, which then holds the port the controller restarts on).
    """
    low = int(EPHEMERAL_RANGE.read_text().split()[0]) if EPHEMERAL_RANGE.exists() else 32768
    for _ in range(500):
        port = random.randrange(max(1024, low - PORT_SPAN), low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (or lingering): draw another
            return port
    raise RuntimeError(f"no free loopback port below {low}")


def wait_for(
    what: str, check: Callable[[], bool], timeout_s: float, interval_s: float = 0.1
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval_s)
    raise TimeoutError(f"timed out after {timeout_s:g}s waiting for {what}")


@dataclass
class ControllerProcess:
    process: subprocess.Popen[bytes]
    policy: Policy
    log_path: Path
    ofp_port: int

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def problems(self) -> list[str]:
        return log_problems(self.log())


def log_problems(log: str) -> list[str]:
    """Lines that mean the controller misbehaved (Faucet's harness fails on these too)."""
    return [
        line
        for line in log.splitlines()
        if " ERROR " in line or "Traceback" in line or " CRITICAL " in line
    ]


@contextmanager
def controller(
    policy_file: Path,
    log_path: Path,
    ofp_port: int,
    *,
    metrics_port: int = 0,
    audit_interval_s: float = 5.0,
    env: dict[str, str] | None = None,
    redis_url: str | None = None,
    extra_args: Sequence[str] = (),
) -> Iterator[ControllerProcess]:
    """A ``flowlane controller`` process; yields once it listens, stops it by PID after."""
    log = log_path.open("wb")  # one log per controller run: problems() reads only this one
    process = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "controller",
            "controller",
            "--policy",
            str(policy_file),
            "--ofp-port",
            str(ofp_port),
            "--metrics-port",
            str(metrics_port),
            "--audit-interval",
            str(audit_interval_s),
            *(["--redis-url", redis_url] if redis_url else []),
            *extra_args,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        env=env,
        start_new_session=True,
    )
    handle = ControllerProcess(process, load_policy_file(policy_file), log_path, ofp_port)
    try:
        wait_for(
            "the controller to listen",
            lambda: process.poll() is not None or "listening for OpenFlow" in handle.log(),
            30,
        )
        if process.poll() is not None:
            raise RuntimeError(f"controller exited with {process.returncode}:\n{handle.log()}")
        yield handle
    finally:
        stop_process(process)
        log.close()


def make_pki(directory: Path) -> list[str]:
    """``flowlane certs init directory``; returns the controller's OpenFlow TLS options."""
    done = subprocess.run(
        [PYTHON, "-m", "controller", "certs", "init", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"flowlane certs init failed: {done.stdout}{done.stderr}")
    return [
        "--ofp-tls-cert",
        str(directory / "controller.pem"),
        "--ofp-tls-key",
        str(directory / "controller.key"),
        "--ofp-ca",
        str(directory / "ca.pem"),
    ]


def set_switch_ssl(directory: Path, ca_directory: Path | None = None) -> None:
    """OVS presents ``directory``'s switch certificate and trusts ``ca_directory``'s CA
    (default: the same). One setting for the whole OVS instance: ``del-ssl`` after."""
    ca = (ca_directory or directory) / "ca.pem"
    subprocess.run(
        [
            "ovs-vsctl",
            "set-ssl",
            str(directory / "switch.key"),
            str(directory / "switch.pem"),
            str(ca),
        ],
        check=True,
    )


def negotiated_tls(log: str) -> list[str]:
    """TLS versions the controller logged for its switch connections."""
    return re.findall(r"connected from \S+ over (TLSv[0-9.]+)", log)


@dataclass
class StackProcess:
    """``flowlane up``: private Redis, controller and API."""

    process: subprocess.Popen[bytes]
    api: str
    log_path: Path
    headers: dict[str, str] = field(default_factory=dict)
    """An admin's ``Authorization`` header: the token the API bootstrapped (read once)."""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def bearer_header(token_file: Path) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_file.read_text().strip()}"}


def wait_for_token(
    token_file: Path, process: subprocess.Popen[Any], log: Callable[[], str]
) -> None:
    """Until the API has written its bootstrap admin token (it does once Redis answers)."""
    wait_for(
        "the API's bootstrap token",
        lambda: process.poll() is not None or token_file.exists(),
        30,
    )
    if not token_file.exists():
        raise RuntimeError(f"no API token in {token_file}:\n{log()}")


@contextmanager
def stack(
    policy_file: Path,
    log_path: Path,
    ofp_port: int,
    *,
    data_dir: Path | None = None,
    metrics_port: int = 0,
) -> Iterator[StackProcess]:
    """The whole stack as ``make run`` starts it, on free ports; stopped by PID after.

    Its Redis keeps its data in ``data_dir`` when given (as ``make run`` does in
    its data directory); otherwise it is ephemeral, so no run sees another's policies.

    ``flowlane up`` stops its children on SIGTERM; if it does not, the whole
    process group is killed so nothing outlives the test.
    """
    api_port = free_port()
    # With a data directory, its tokens outlive the stack: so does the file holding them.
    token_file = (
        data_dir / "admin-token" if data_dir is not None else log_path.with_name("admin-token")
    )
    if data_dir is None:
        token_file.unlink(missing_ok=True)
    log = log_path.open("wb")
    process = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "controller",
            "up",
            "--token-file",
            str(token_file),
            "--policy",
            str(policy_file),
            "--api-port",
            str(api_port),
            "--ofp-port",
            str(ofp_port),
            "--metrics-port",
            str(metrics_port),
            # A data directory outlives the stack, as ``make run``'s does: a restart keeps the
            # policy stored through the API instead of putting the file back over it.
            *(
                ["--data-dir", str(data_dir), "--keep-stored-policy"]
                if data_dir is not None
                else ["--ephemeral"]
            ),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        start_new_session=True,
    )
    handle = StackProcess(process, f"http://127.0.0.1:{api_port}", log_path)
    try:
        wait_for(
            "flowlane up",
            lambda: process.poll() is not None or "flowlane is up" in handle.log(),
            60,
        )
        if process.poll() is not None:
            raise RuntimeError(f"flowlane up exited with {process.returncode}:\n{handle.log()}")
        wait_for_token(token_file, process, handle.log)
        handle.headers = bearer_header(token_file)
        yield handle
    finally:
        stop_process(process, timeout_s=20)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


def ofctl(*args: str) -> str:
    """``ovs-ofctl`` speaking OpenFlow 1.3 (the bridges refuse 1.0)."""
    return subprocess.run(
        ["ovs-ofctl", "-O", "OpenFlow13", *args], capture_output=True, text=True, check=True
    ).stdout


def datapath_id(bridge: str) -> str:
    """The bridge's datapath id as 16 hex digits (how the store names switches)."""
    out = subprocess.run(
        ["ovs-vsctl", "get", "bridge", bridge, "datapath_id"], capture_output=True, text=True
    ).stdout
    return out.strip().strip('"')


def ofctl_cookies(bridge: str) -> list[int]:
    return [int(m, 16) for m in re.findall(r"cookie=(0x[0-9a-f]+)", ofctl("dump-flows", bridge))]


def ofctl_ports(bridge: str) -> dict[str, int]:
    out = ofctl("show", bridge)
    return {name: int(number) for number, name in re.findall(r"^\s*(\d+)\((\S+)\):", out, re.M)}


def sync_gap(
    bridge: str, policy: Policy, ports: list[str], jobs: Sequence[JobSpec] = ()
) -> str | None:
    """What keeps the switch from its plan (flows, queues, tc filters, queue lengths), or None.

    Planned by the controller's one planner (``controller.pipeline.plan.plan``) with the
    registered ``jobs``: their table-0 entries and, in a per-job class, their queues.
    """
    # Learned counting entries and detector overrides follow the traffic, not the policy;
    # on a fabric, forwarding follows the discovered topology (pings prove it instead).
    dynamic = {Owner.LEARNED, Owner.DETECTOR}
    if policy.forwarding.fabric:
        dynamic |= FABRIC_OWNERS
    speeds = {port: _link_bps(port) for port in ports}
    inputs = SwitchInputs(
        dpid=int(datapath_id(bridge), 16),
        ports=tuple(
            PortState(number, name, speeds.get(name))
            for name, number in sorted(ofctl_ports(bridge).items())
        ),
    )
    planned_switch = plan(policy, jobs, inputs)
    planned = sorted(
        flow.cookie
        for flow in planned_switch.desired.flows
        if cookie_owner(flow.cookie) not in dynamic
    )
    present = sorted(c for c in ofctl_cookies(bridge) if cookie_owner(c) not in dynamic)
    if present != planned:
        missing, extra = set(planned) - set(present), set(present) - set(planned)
        return f"flows: {len(missing)} missing, {len(extra)} unexpected, {len(present)} present"
    states = Ovsdb().port_qos(ports)
    for port in ports:
        if port not in states:
            return f"{port}: not in OVSDB"
        if port not in planned_switch.qos:
            return f"{port}: not a port of {bridge}"
        qos = planned_switch.qos[port]
        if not states[port].satisfies(qos):
            return f"{port}: QoS {states[port]} is not {qos}"
        if tc.present_keys(port) != tc.wanted_keys(tc_filters(qos)):
            return f"{port}: tc filters differ"
        if tc.leaves_missing(tc.class_stats(port)):
            return f"{port}: an HTB class lacks its bounded queue"
    return None


def in_sync(bridge: str, policy: Policy, ports: list[str], jobs: Sequence[JobSpec] = ()) -> bool:
    return sync_gap(bridge, policy, ports, jobs) is None


def _link_bps(port: str) -> int | None:
    """The speed OVS reports for a port, as the controller sees it (bit/s)."""
    out = subprocess.run(
        ["ovs-vsctl", "--timeout=5", "get", "interface", port, "link_speed"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return int(out) if out.isdigit() and int(out) > 0 else None


def wait_in_sync(
    bridge: str,
    policy: Policy,
    ports: list[str],
    timeout_s: float = 30,
    exited: Callable[[], int | None] | None = None,
    jobs: Sequence[JobSpec] = (),
) -> None:
    """Until ``bridge`` holds its plan (with ``jobs`` registered); ``exited`` (the controller's
    exit status, None while it runs) ends the wait at once when the controller that would get
    it there is gone."""

    def done() -> bool:
        status = exited() if exited is not None else None
        if status is not None:
            raise RuntimeError(f"the controller exited ({status}) before {bridge} was in sync")
        return in_sync(bridge, policy, ports, jobs)

    try:
        wait_for(f"{bridge} to hold the planned pipeline and queues", done, timeout_s, 0.25)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}: {sync_gap(bridge, policy, ports, jobs)}") from None


def ofctl_tx_packets(bridge: str) -> dict[int, int]:
    """Packets each port has sent (``dump-ports``), by OpenFlow port number."""
    out = ofctl("dump-ports", bridge)
    return {
        int(number): int(packets)
        for number, packets in re.findall(r"port\s+(\d+):.*?tx pkts=(\d+)", out, re.S)
    }


@contextlib.contextmanager
def max_revalidator(milliseconds: int | None) -> Iterator[None]:
    """ovs-vswitchd's ``other_config:max-revalidator`` (how often it refreshes flow
    counters) set to ``milliseconds``, or unset (its 500 ms) for None, for the block; put
    back as it was after, since it belongs to the machine's ovs-vswitchd."""

    def vsctl(*args: str) -> str:
        return subprocess.run(
            ["ovs-vsctl", *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    key = "other_config:max-revalidator"
    unset = ("remove", "Open_vSwitch", ".", "other_config", "max-revalidator")
    before = vsctl("--if-exists", "get", "Open_vSwitch", ".", key).strip('"')
    vsctl(
        *(unset if milliseconds is None else ("set", "Open_vSwitch", ".", f"{key}={milliseconds}"))
    )
    try:
        yield
    finally:
        vsctl(*(("set", "Open_vSwitch", ".", f"{key}={before}") if before else unset))


def set_rstp(bridges: list[str], root: str | None) -> None:
    """RSTP on every bridge with ``root`` as the root bridge, or (``root`` None) off everywhere.

    Call it while the bridges hold no flows (``reset_switches``): with RSTP
    off, ``NORMAL`` flows left on a fabric with loops would flood forever.
    """
    for bridge in bridges:
        if root is None:
            settings = ["rstp_enable=false"]
        else:
            priority = 4096 if bridge == root else 32768
            settings = ["rstp_enable=true", f"other_config:rstp-priority={priority}"]
        subprocess.run(["ovs-vsctl", "set", "bridge", bridge, *settings], check=True)


def reset_switches(bridges: list[str]) -> None:
    """No flows, groups or meters: the next controller starts from a clean slate.

    The bridges are fail-mode secure, so until it installs its own they drop
    everything; nothing can loop meanwhile.
    """
    for bridge in bridges:
        for command in ("del-flows", "del-groups", "del-meters"):
            subprocess.run(
                ["ovs-ofctl", "-O", "OpenFlow13", command, bridge], capture_output=True, check=False
            )


def diagnostics(bridge: str, ports: list[str], controller_log: str = "") -> str:
    """Everything worth reading when a scenario fails."""
    commands = [
        ["ovs-vsctl", "show"],
        ["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge],
        ["ovs-ofctl", "-O", "OpenFlow13", "dump-groups", bridge],
        ["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", bridge],
        ["ovs-vsctl", "list", "qos"],
        ["ovs-vsctl", "list", "queue"],
    ]
    for port in ports:
        commands += [
            ["tc", "-s", "class", "show", "dev", port],
            ["tc", "filter", "show", "dev", port, "parent", "1:"],
        ]
    sections = []
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True)
        sections.append(f"$ {' '.join(command)}\n{done.stdout}{done.stderr}")
    sections.append(f"--- controller log (tail) ---\n{controller_log[-20000:]}")
    return "\n".join(sections)


def user_switch(protocols: str = "OpenFlow13") -> Callable[..., OVSSwitch]:
    """OVS on the userspace datapath: this machine has no openvswitch kernel module."""
    return partial(OVSSwitch, datapath="user", protocols=protocols)


@contextmanager
def network(topo: Topo, ofp_port: int, rstp_root: str | None = None) -> Iterator[Net]:
    """A started Mininet network with TX checksum offload off on every host.

    TCP through the userspace datapath stalls with offload on. Every host
    runs ``HOST_CONGESTION_CONTROL`` whatever the machine's default is (these
    machines default to BBR): BBR holds a FIFO queue near one round trip, so a
    FIFO baseline's latency would depend on the machine more than on the
    queue, and cubic is what most training hosts run. The
    controller reconnect back-off is cut to 1 s so a restarted controller is
    found quickly.  ``rstp_root`` turns on RSTP on every bridge, with that
    bridge as the root: a fabric with loops (leaf-spine) forwards with
    ``NORMAL``, which follows the spanning tree.  It is set while the bridges
    still have no flows (fail-mode secure, before a controller runs), so no
    broadcast storm can start before the tree has converged.
    """
    setLogLevel("error")  # the switch starts before the controller: no "Unable to contact"
    net = Mininet(
        topo=topo,
        switch=user_switch(),
        controller=partial(RemoteController, ip="127.0.0.1", port=ofp_port),
        host=OffloadOffHost,  # any topology's hosts: TCP stalls with TX checksum offload on
        autoSetMacs=False,
        build=False,
    )
    try:
        net.build()
        net.start()
        if rstp_root is not None:
            for switch in net.switches:
                priority = 4096 if switch.name == rstp_root else 32768
                subprocess.run(
                    [
                        "ovs-vsctl",
                        "set",
                        "bridge",
                        switch.name,
                        "rstp_enable=true",
                        f"other_config:rstp-priority={priority}",
                    ],
                    check=True,
                )
        _allow_congestion_control()
        for host in net.hosts:
            _set_congestion_control(host)
        for switch in net.switches:
            for uuid in (
                subprocess.run(
                    ["ovs-vsctl", "get", "bridge", switch.name, "controller"],
                    capture_output=True,
                    text=True,
                )
                .stdout.strip("[] \n")
                .split(",")
            ):
                if uuid.strip():
                    subprocess.run(
                        ["ovs-vsctl", "set", "controller", uuid.strip(), "max_backoff=1000"],
                        check=False,
                    )
        yield net
    finally:
        net.stop()
        for node in net.controllers:  # RemoteController.stop() leaves its shell running
            node.terminate()
        Ovsdb().collect_garbage()


def _allow_congestion_control() -> None:
    """Let network namespaces choose ``HOST_CONGESTION_CONTROL``.

    A namespace may only pick an algorithm the machine allows, and these
    machines allow just ``reno bbr``. Adding one to the list changes nothing
    for anything already running, so it is left in place afterwards.
    """
    allowed_file = Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
    allowed = allowed_file.read_text().split()
    if HOST_CONGESTION_CONTROL not in allowed:
        allowed_file.write_text(" ".join([*allowed, HOST_CONGESTION_CONTROL]))


def _set_congestion_control(host: Node) -> None:
    key = "net.ipv4.tcp_congestion_control"
    host.cmd(f"sysctl -q -w {key}={HOST_CONGESTION_CONTROL}")
    current = host.cmd(f"sysctl -n {key}").strip()
    if current != HOST_CONGESTION_CONTROL:
        raise PrerequisiteError(
            f"host {host.name}: {key} is {current!r}, not {HOST_CONGESTION_CONTROL!r}"
            " (is the tcp_cubic module available?)"
        )


def host_popen(host: Node, args: list[str], **kwargs: Any) -> subprocess.Popen[str]:
    return host.popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
