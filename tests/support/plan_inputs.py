"""Random plan inputs of switch 1 (hypothesis strategies): ports up and down, detector
overrides, and a fabric with edge ports, half-known links, hosts and pinned paths.

Shared by the dry-run property test (``tests/api/test_plan_property.py``) and the
records' round trip (``tests/store/test_inputs.py``).
"""

from __future__ import annotations

from hypothesis import strategies as st

from controller.fabric.model import Host, Link, PortRef, Topology
from controller.flowid import ETH_TYPE_IPV4, ETH_TYPE_IPV6, IP_PROTO_TCP, IP_PROTO_UDP, FlowId
from controller.pipeline.desired import FabricInputs
from controller.pipeline.plan import PortState, SwitchInputs

DPID = 1
CLASSES = ["inference", "training", "best-effort", "bulk", "latency", "no-such-class"]
"""The classes of the policies the tests plan with, and one none of them has."""

flow_ids = st.one_of(
    st.builds(
        FlowId,
        st.just(ETH_TYPE_IPV4),
        st.sampled_from([IP_PROTO_TCP, IP_PROTO_UDP]),
        st.integers(0, 2**32 - 1),
        st.integers(0, 2**32 - 1),
        st.integers(0, 0xFFFF),
        st.integers(0, 0xFFFF),
    ),
    st.builds(
        FlowId,
        st.just(ETH_TYPE_IPV6),
        st.sampled_from([IP_PROTO_TCP, IP_PROTO_UDP]),
        st.integers(0, 2**128 - 1),
        st.integers(0, 2**128 - 1),
        st.integers(0, 0xFFFF),
        st.integers(0, 0xFFFF),
    ),
)


@st.composite
def fabrics(draw: st.DrawFn, ports: tuple[PortState, ...]) -> FabricInputs:
    """Switch 1 among up to three others: some of its ports face one (a link seen both ways,
    or one way only), hosts sit behind the rest and behind the others, and elephants are
    pinned through its uplinks."""
    others = draw(st.lists(st.integers(2, 4), min_size=1, max_size=3, unique=True))
    links: set[Link] = set()
    facing: list[tuple[int, PortRef]] = []
    for port in ports:
        if others and draw(st.integers(0, 2)) > 0:
            peer = PortRef(draw(st.sampled_from(others)), port.number)
            ours = PortRef(DPID, port.number)
            links.add(Link(ours, peer))
            if draw(st.integers(0, 4)):  # mostly both ways; sometimes a half-known link
                links.add(Link(peer, ours))
            facing.append((port.number, peer))
    # a far leaf behind every other switch: two uplinks toward it make a multipath group
    far = 9
    if others and draw(st.integers(0, 3)) > 0:
        for index, dpid in enumerate(others):
            down, up = PortRef(dpid, 20), PortRef(far, 1 + index)
            links |= {Link(down, up), Link(up, down)}
    facing_numbers = {number for number, _ in facing}
    free = [port for port in ports if port.number not in facing_numbers]
    hosts = [
        Host(0x100 + port.number, PortRef(DPID, port.number), 0x0A000000 + port.number)
        for port in free
        if draw(st.booleans())
    ]
    hosts += [Host(0x200 + dpid, PortRef(dpid, 9), 0x0A000100 + dpid) for dpid in others]
    hosts.append(Host(0x300, PortRef(far, 9), 0x0A000200))
    capacities = {link.src: draw(st.sampled_from([10**8, 10**9, 10**10])) for link in sorted(links)}
    topology = Topology(
        switches=frozenset({DPID, *others, far}),
        links=frozenset(links),
        hosts=tuple(hosts),
        capacity_bps=capacities,
    )
    # an edge port is up, settled (some up ports are not yet) and faces no switch
    edge = frozenset(port.number for port in free if port.up and draw(st.booleans()))
    pinned = {}
    for number, peer in facing:
        if draw(st.booleans()):
            pinned[draw(flow_ids)] = ((DPID, number), (peer.dpid, 9))
    return FabricInputs(topology, edge, pinned)


@st.composite
def switch_inputs(draw: st.DrawFn) -> SwitchInputs:
    numbers = draw(st.lists(st.integers(1, 8), min_size=2, max_size=6, unique=True))
    ports = tuple(
        PortState(
            number,
            f"s1-eth{number}",
            draw(st.sampled_from([None, 10**8, 10**9, 10**10])),
            up=draw(st.integers(0, 3)) > 0,
            hw_addr=0x020000000000 + number,
        )
        for number in sorted(numbers)
    )
    overrides = draw(st.dictionaries(flow_ids, st.sampled_from(CLASSES), max_size=3))
    fabric = draw(st.none() | fabrics(ports))
    return SwitchInputs(DPID, ports, overrides, fabric, 1, draw(st.integers(0, 9)))
