"""A port's HTB classes (rates, bursts, exact counters) and its DSCP → class u32 filters,
over rtnetlink (pyroute2): no process spawned per port or per read.

OVS owns the port's root qdisc and drops every filter when it re-creates
it, so ``ensure`` compares what is there with what should be and rewrites
only on a difference: calling it often is cheap and repairs lost filters.

OVS also sets the burst of the root HTB class (``1:fffe``) itself, to about
one frame, with no OVSDB setting to change it, and sets it again on every
reconfiguration of the switch (any OVSDB change, to any bridge).
``ensure_root_burst`` puts the planned burst back; the queue telemetry's
periodic read notices when OVS has reset it (``root_burst_short``).

Functional core: decoding netlink messages into ``HtbClass`` and ``FilterKey``
values, and the planned filters into the same keys, are pure functions.
Thin shell: ``Netlink`` owns one pyroute2 socket and an ifindex cache. A
pyroute2 socket must not be shared between threads, so the module-level
functions use one ``Netlink`` per calling thread (the actors' runtime's blocking
threads call them all: a fixed number, each keeping its socket for the process's
life), which a thread that ends closes with ``close()``.
"""

from __future__ import annotations

import errno
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any, Final, NamedTuple, TypeVar

from pyroute2 import IPRoute, NetlinkError
from pyroute2.netlink.rtnl.tcmsg import plugins as _tc_plugins
from pyroute2.netlink.rtnl.tcmsg import sched_pfifo as _sched_pfifo

from controller.qos.plan import TcFilter
from controller.qos.telemetry import ClassCounters

ROOT_CLASSID: Final = "1:fffe"
"""The HTB class OVS's linux-htb puts every queue under; it carries the port's ceiling."""

BURST_SLACK: Final = 0.9
"""The kernel keeps a burst as scheduler ticks of a time written in whole microseconds, so it
reads back a little under what was asked; only a real shortfall (OVS's one frame) is short."""

LEAF_WAIT_S: Final = 2.0
"""Longest wait for ovs-vswitchd to make the classes a QoS change asked for (it takes
milliseconds; a busy machine, more)."""
LEAF_POLL_S: Final = 0.02

LEAF_KIND: Final = "bfifo"
"""The queue under each HTB class: a FIFO limited in bytes (``plan.htb_queue_bytes``)."""

LEAF_MAJOR: Final = 0xB000
"""Handles of the queues under the HTB classes start here (see ``leaf_handle``).

The previous version hung ``pfifo`` leaves at ``0x8000 + minor``; a new major makes such a
leaf read as not ours from the class dump alone (``leaves_missing``), and lets ``replace``
graft the ``bfifo`` over it: the kernel refuses to change a qdisc's kind under its handle."""

# pyroute2 knows bfifo by no name; its options are pfifo's (struct tc_fifo_qopt, one u32
# limit), so pfifo's codec encodes the limit and decodes it back from a dump.
_tc_plugins.setdefault(LEAF_KIND, _sched_pfifo)

FILTER_PARENT: Final = 0x10000
"""``1:``, the HTB qdisc OVS's linux-htb QoS makes the port's root."""

_TC_H_ROOT: Final = 0xFFFFFFFF
_PRIORITY: Final = {"ip": 10, "ipv6": 11}
_ETH_P: Final = {"ip": 0x0800, "ipv6": 0x86DD}
_PROTOCOL_NAMES: Final = {number: name for name, number in _ETH_P.items()}
_SHIFT: Final = {
    # IPv4: TOS is the second byte of the header's first 32-bit word.
    "ip": 16,
    # IPv6: Traffic Class sits at bits 20..27 of the first word.
    "ipv6": 20,
}


class TcError(RuntimeError):
    """tc on ``device`` failed; ``missing_device`` when the interface does not exist."""

    missing_device: bool = False

    def __init__(self, device: str, detail: str) -> None:
        self.device = device
        self.detail = detail
        super().__init__(f"tc failed on {device}: {detail}")


class DeviceGoneError(TcError):
    """The interface is not there (any more): a port being deleted, not a fault."""

    missing_device = True

    def __init__(self, device: str) -> None:
        super().__init__(device, "no such interface")


# ---- the functional core -----------------------------------------------------------------


class U32Word(NamedTuple):
    """One 32-bit word of a packet a u32 filter compares: at ``offset`` (a multiple of 4)
    from the network header, ``value`` under ``mask``."""

    offset: int
    value: int
    mask: int


class FilterKey(NamedTuple):
    """What a DSCP filter does: packets of ``protocol`` whose words match go to ``classid``."""

    protocol: str
    words: tuple[U32Word, ...]
    classid: str


@dataclass(frozen=True, slots=True)
class HtbClass:
    """One HTB class of a port as the kernel holds it."""

    classid: str
    parent: str
    """``root`` for the qdisc's top class (OVS's ``1:fffe``)."""
    rate_bytes_s: int
    ceil_bytes_s: int
    burst_bytes: int
    cburst_bytes: int
    prio: int
    counters: ClassCounters
    leaf: int = 0
    """The handle of the class's queue (its leaf qdisc); 0 for the kernel's default one."""


@dataclass(frozen=True, slots=True)
class Psched:
    """The kernel's packet-scheduler clock (``/proc/net/psched``): HTB keeps bursts as its
    ticks."""

    ticks_per_us: float

    @staticmethod
    def parse(text: str) -> Psched:
        # iproute2's tc_core_init: t2us/us2t ticks a microsecond, scaled by the clock's resolution
        t2us, us2t, clock_res, _ = (int(field, 16) for field in text.split())
        return Psched(t2us / us2t * clock_res / 1_000_000)

    def bytes_in(self, ticks: int, rate_bytes_s: int) -> int:
        """The burst a rate sends in ``ticks``: what tc prints, without its rounding."""
        return round(rate_bytes_s * ticks / self.ticks_per_us / 1_000_000)


def classid(handle: int) -> str:
    """``0x1fffe`` → ``1:fffe``, as tc names classes."""
    if handle == _TC_H_ROOT:
        return "root"
    return f"{handle >> 16:x}:{handle & 0xFFFF:x}"


def byte_matches(keys: Iterable[tuple[int, int, int]]) -> dict[int, tuple[int, int]]:
    """u32 keys ``(offset, value, mask)`` as the bytes they test: position → (value, mask).

    tc writes an IPv4 TOS match as the word at 0 under ``00fc0000``, pyroute2 as the word at
    1 under ``fc000000``: the same byte, which is what makes the two equal.
    """
    tested: dict[int, tuple[int, int]] = {}
    for offset, value, mask in keys:
        for index in range(4):
            shift = 8 * (3 - index)
            byte_mask = (mask >> shift) & 0xFF
            if byte_mask:
                old_value, old_mask = tested.get(offset + index, (0, 0))
                byte_value = (value >> shift) & byte_mask
                tested[offset + index] = (old_value | byte_value, old_mask | byte_mask)
    return tested


def u32_words(keys: Iterable[tuple[int, int, int]]) -> tuple[U32Word, ...]:
    """Any u32 keys as word-aligned words, in offset order (tc's own form)."""
    words: dict[int, tuple[int, int]] = {}
    for position, (value, mask) in byte_matches(keys).items():
        word = position - position % 4
        shift = 8 * (3 - position % 4)
        old_value, old_mask = words.get(word, (0, 0))
        words[word] = (old_value | value << shift, old_mask | mask << shift)
    return tuple(U32Word(offset, value, mask) for offset, (value, mask) in sorted(words.items()))


def parse_u32_sel(raw: bytes) -> list[tuple[int, int, int]]:
    """The keys ``(offset, value, mask)`` of a ``struct tc_u32_sel`` (TCA_U32_SEL's payload).

    Read from the bytes: pyroute2 0.9 decodes the keys four bytes off.
    """
    keys = []
    for index in range(raw[2]):  # nkeys; the 16-byte selector header comes first
        start = 16 + 16 * index
        # struct tc_u32_key: mask and val in network order, off in host order
        mask, value = struct.unpack_from(">II", raw, start)
        (offset,) = struct.unpack_from("=i", raw, start + 8)
        keys.append((offset, value, mask))
    return keys


def planned_key(item: TcFilter) -> FilterKey:
    shift = _SHIFT[item.protocol]
    value, mask = (item.dscp << 2) << shift, 0xFC << shift
    return FilterKey(item.protocol, u32_words([(0, value, mask)]), item.classid)


def wanted_keys(filters: Sequence[TcFilter]) -> set[FilterKey]:
    return {planned_key(item) for item in filters}


def u32_key_text(item: TcFilter) -> str:
    """The filter's match as pyroute2's ``keys`` spell it: ``value/mask+offset``."""
    shift = _SHIFT[item.protocol]
    return f"{(item.dscp << 2) << shift:#010x}/{0xFC << shift:#010x}+0"


def _nla_raw(attr: Any) -> bytes:
    """An attribute's payload, past its 4-byte header, from the message's buffer."""
    return bytes(attr.data[attr.offset + 4 : attr.offset + attr.length])


def filter_key(message: Any) -> FilterKey | None:
    """A u32 filter dump entry as a key; None for what is not a classifying u32 rule (the
    hash tables tc dumps beside each rule, other classifiers)."""
    if message.get_attr("TCA_KIND") != "u32":
        return None
    options = message.get_attr("TCA_OPTIONS")
    if options is None:
        return None
    selector, target = options.get_attr("TCA_U32_SEL"), options.get_attr("TCA_U32_CLASSID")
    if selector is None or target is None:
        return None
    number = socket.ntohs(message["info"] & 0xFFFF)  # tcm_info: prio << 16 | htons(protocol)
    protocol = _PROTOCOL_NAMES.get(number, f"{number:#06x}")
    return FilterKey(protocol, u32_words(parse_u32_sel(_nla_raw(selector))), classid(target))


def filter_keys(messages: Iterable[Any]) -> set[FilterKey]:
    return {key for message in messages if (key := filter_key(message)) is not None}


# rtnetlink's numbers for what a class dump carries (linux/rtnetlink.h, pkt_sched.h,
# gen_stats.h)
_TCA_KIND, _TCA_OPTIONS, _TCA_STATS2 = 1, 2, 7
_TCA_HTB_PARMS, _TCA_HTB_RATE64, _TCA_HTB_CEIL64 = 1, 6, 7
_TCA_STATS_BASIC, _TCA_STATS_QUEUE, _TCA_STATS_PKT64 = 1, 3, 8
_NLMSG_HEADER = 16
_TCMSG = struct.Struct("=BBHiIII")  # family, pads, ifindex, handle, parent, info
_HTB_OPT = struct.Struct("=8xI8xI5I")  # rate and ceil (in their tc_ratespec), buffer…prio


def netlink_attributes(raw: bytes, start: int = 0) -> dict[int, bytes]:
    """type → payload of the attributes from ``start`` (4-byte aligned TLVs; the nested and
    byte-order flags stripped from the type)."""
    found = {}
    at = start
    while at + 4 <= len(raw):
        length, kind = struct.unpack_from("=HH", raw, at)
        if length < 4:
            break
        found[kind & 0x3FFF] = raw[at + 4 : at + length]
        at += (length + 3) & ~3
    return found


def counters_from_stats2(stats: Mapping[int, bytes]) -> ClassCounters:
    """TCA_STATS2 of a class: exact bytes, packets, drops, overlimits and backlog."""
    sent, packets = struct.unpack_from("=QI", stats.get(_TCA_STATS_BASIC, bytes(12)))
    if _TCA_STATS_PKT64 in stats:  # the count outgrew TCA_STATS_BASIC's 32 bits
        (packets,) = struct.unpack_from("=Q", stats[_TCA_STATS_PKT64])
    qlen, backlog, drops, _requeues, overlimits = struct.unpack_from(
        "=5I", stats.get(_TCA_STATS_QUEUE, bytes(20))
    )
    return ClassCounters(sent, packets, drops, overlimits, backlog, qlen)


def decode_htb_class(raw: bytes, psched: Psched) -> HtbClass | None:
    """One RTM_NEWTCLASS message (header included) as an ``HtbClass``; None for another
    qdisc's classes.

    Decoded from the bytes rather than through pyroute2's attribute objects: this runs for
    every class of every port every second, and the bytes read about five times quicker
    (0.06 against 0.29 ms for a port's four classes).
    """
    _, _, _, _, handle, parent, leaf = _TCMSG.unpack_from(raw, _NLMSG_HEADER)
    attrs = netlink_attributes(raw, _NLMSG_HEADER + _TCMSG.size)
    if attrs.get(_TCA_KIND, b"").rstrip(b"\0") != b"htb":
        return None
    options = netlink_attributes(attrs.get(_TCA_OPTIONS, b""))
    if _TCA_HTB_PARMS not in options:
        return None
    rate, ceil, buffer, cbuffer, _quantum, _level, prio = _HTB_OPT.unpack_from(
        options[_TCA_HTB_PARMS]
    )
    # Above 2^32 B/s the 32-bit fields hold ~0 and the true rate comes in its own attribute.
    if _TCA_HTB_RATE64 in options:
        (rate,) = struct.unpack_from("=Q", options[_TCA_HTB_RATE64])
    if _TCA_HTB_CEIL64 in options:
        (ceil,) = struct.unpack_from("=Q", options[_TCA_HTB_CEIL64])
    return HtbClass(
        classid=classid(handle),
        parent=classid(parent),
        rate_bytes_s=rate,
        ceil_bytes_s=ceil,
        burst_bytes=psched.bytes_in(buffer, rate),
        cburst_bytes=psched.bytes_in(cbuffer, ceil),
        prio=prio,
        counters=counters_from_stats2(netlink_attributes(attrs.get(_TCA_STATS2, b""))),
        leaf=leaf,
    )


def message_bytes(message: Any) -> bytes:
    """A pyroute2 message's own bytes, header included, from the buffer it was read into."""
    return bytes(message.data[message.offset : message.offset + message["header"]["length"]])


def htb_class(message: Any, psched: Psched) -> HtbClass | None:
    return decode_htb_class(message_bytes(message), psched)


def htb_classes(messages: Iterable[Any], psched: Psched) -> dict[str, HtbClass]:
    return {
        found.classid: found
        for message in messages
        if (found := htb_class(message, psched)) is not None
    }


def counters_of(classes: Mapping[str, HtbClass]) -> dict[str, ClassCounters]:
    return {name: found.counters for name, found in classes.items()}


def htb_bursts(classes: Mapping[str, HtbClass]) -> dict[str, int]:
    """classid → burst in bytes."""
    return {name: found.burst_bytes for name, found in classes.items()}


def leaf_handle(classid_text: str) -> int:
    """The handle of the queue ``ensure_leaf_queues`` hangs under HTB class ``1:<minor>``:
    major ``LEAF_MAJOR + minor`` (unique on the port, never the root's ``1:``)."""
    minor = int(classid_text.split(":")[1], 16)
    return (LEAF_MAJOR + minor) << 16


def leaf_limits(messages: Iterable[Any], index: int | None = None) -> dict[str, int]:
    """HTB class → the byte limit of the ``bfifo`` under it (other leaf qdiscs left out: a
    ``pfifo`` of the previous version is no queue of the planned length).

    ``index``: the device's; a qdisc dump answers for every device whatever it asked.
    """
    limits: dict[str, int] = {}
    for message in messages:
        if index is not None and int(message["index"]) != index:
            continue
        if message.get_attr("TCA_KIND") != LEAF_KIND:
            continue
        options = message.get_attr("TCA_OPTIONS")
        if options is None:
            continue
        limits[classid(int(message["parent"]))] = int(options["limit"])
    return limits


def short_queues(
    classes: Mapping[str, HtbClass], limits: Mapping[str, int], limit_bytes: int
) -> list[str]:
    """The port's queue classes whose leaf is not a ``bfifo`` of ``limit_bytes``."""
    return sorted(
        name for name in classes if name != ROOT_CLASSID and limits.get(name) != limit_bytes
    )


def leaves_missing(classes: Mapping[str, HtbClass]) -> bool:
    """Whether a queue class of the port lacks the queue ``ensure_leaf_queues`` gives it.

    Read from the class dump itself (its ``tcm_info`` is the leaf's handle), so the
    periodic read needs no extra request: OVS makes a job's class after the OVSDB
    transaction that asked for it returns, and this is how the class is noticed.
    """
    return any(
        found.leaf != leaf_handle(name) for name, found in classes.items() if name != ROOT_CLASSID
    )


def root_burst_short(classes: Mapping[str, HtbClass], burst_bytes: int) -> bool:
    """Whether the port's root HTB class has less burst than planned.

    False when there is no root class (no linux-htb QoS yet): nothing to repair.
    """
    root = classes.get(ROOT_CLASSID)
    return root is not None and root.burst_bytes < burst_bytes * BURST_SLACK


# ---- the shell: one netlink socket ---------------------------------------------------------


@cache
def psched() -> Psched:
    """The clock never changes while the kernel runs: read once."""
    return Psched.parse(Path("/proc/net/psched").read_text())


_T = TypeVar("_T")


class Netlink:
    """One rtnetlink socket (pyroute2 ``IPRoute``) and the ifindex of every port it met.

    Not thread-safe, like the socket: use one per thread (``netlink()``).
    """

    def __init__(self, ipr: Any = None) -> None:
        # groups=0: no multicast subscription, so no link/route events pile up unread
        self._ipr: Any = ipr if ipr is not None else IPRoute(groups=0)
        self._index: dict[str, int] = {}
        self._leaf_bytes: dict[tuple[str, str], int] = {}
        """(device, class) → the byte limit this process gave or saw the class's own leaf
        have: a qdisc dump answers for every device of the machine, so it is read only for
        a class whose leaf this process has not checked (or whose limit is to change)."""

    def close(self) -> None:
        self._ipr.close()
        self._index.clear()
        self._leaf_bytes.clear()

    def __enter__(self) -> Netlink:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def forget(self, device: str) -> None:
        """Look ``device`` up again next time (it was deleted, maybe re-created)."""
        self._index.pop(device, None)

    def ifindex(self, device: str) -> int:
        index = self._index.get(device)
        if index is None:
            found = self._request(device, lambda: self._ipr.link_lookup(ifname=device))
            if not found:
                raise DeviceGoneError(device)
            index = self._index[device] = int(found[0])
        return index

    def _request(self, device: str, call: Callable[[], _T]) -> _T:
        try:
            return call()
        except NetlinkError as exc:
            if exc.code == errno.ENODEV:
                self.forget(device)
                raise DeviceGoneError(device) from exc
            name = errno.errorcode.get(exc.code, str(exc.code))
            raise TcError(device, f"{name}: {exc.args[-1]}") from exc
        except OSError as exc:
            raise TcError(device, f"netlink: {exc}") from exc

    def _on_port(self, device: str, operation: Callable[[int], _T]) -> _T:
        """``operation(ifindex)``; once more with a fresh ifindex when the cached one is gone
        (a port deleted and made again under the same name gets a new one)."""
        index = self.ifindex(device)
        try:
            return operation(index)
        except DeviceGoneError:
            if self.ifindex(device) == index:
                raise
            return operation(self._index[device])

    def _checked(self, device: str, index: int) -> None:
        """An empty dump looks the same for a port with no QoS and for an ifindex that is
        gone: tell them apart (only then, so the periodic read costs one request)."""
        if self._request(device, lambda: self._ipr.link_lookup(ifname=device)) != [index]:
            self.forget(device)
            raise DeviceGoneError(device)

    def classes(self, device: str) -> dict[str, HtbClass]:
        """The port's HTB classes with their counters, exact."""

        def read(index: int) -> dict[str, HtbClass]:
            messages = self._request(device, lambda: tuple(self._ipr.get_classes(index=index)))
            if not messages:
                self._checked(device, index)
            return htb_classes(messages, psched())

        return self._on_port(device, read)

    def filter_keys(self, device: str) -> set[FilterKey]:
        def read(index: int) -> set[FilterKey]:
            messages = self._request(
                device, lambda: tuple(self._ipr.get_filters(index=index, parent=FILTER_PARENT))
            )
            if not messages:
                self._checked(device, index)
            return filter_keys(messages)

        return self._on_port(device, read)

    def ensure_filters(self, device: str, filters: Sequence[TcFilter]) -> bool:
        """Make the port's filters exactly ``filters``; True when something was rewritten."""
        wanted = wanted_keys(filters)
        if self.filter_keys(device) == wanted:
            return False

        def add(index: int, item: TcFilter) -> Any:
            return self._ipr.tc(
                "add-filter",
                "u32",
                index=index,
                parent=FILTER_PARENT,
                prio=_PRIORITY[item.protocol],
                protocol=_ETH_P[item.protocol],
                target=item.classid,
                keys=[u32_key_text(item)],
            )

        def rewrite(index: int) -> None:
            # All of chain 0 under 1: at once (no prio): what tc filter del does.
            self._request(
                device, lambda: self._ipr.tc("del-filter", index=index, parent=FILTER_PARENT)
            )
            for item in filters:
                self._request(device, partial(add, index, item))

        self._on_port(device, rewrite)
        if self.filter_keys(device) != wanted:
            raise TcError(device, "filters did not take effect")
        return True

    def leaf_limits(self, device: str) -> dict[str, int]:
        """HTB class → the byte limit of its ``bfifo`` (see ``leaf_limits``)."""

        def read(index: int) -> dict[str, int]:
            messages = self._request(device, lambda: tuple(self._ipr.get_qdiscs(index=index)))
            return leaf_limits(messages, index)

        return self._on_port(device, read)

    def ensure_leaf_queues(
        self,
        device: str,
        limit_bytes: int,
        planned: Sequence[str] = (),
        wait_s: float = LEAF_WAIT_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> bool:
        """Put a ``bfifo`` of ``limit_bytes`` under every queue class of the port; True if
        one changed.  OVS's classes otherwise get the kernel's default queue, as long as the
        device's ``txqueuelen``, far too deep for a slow port (``plan.QUEUE_S``).

        ``planned``: the classes the port should have.  ovs-vswitchd makes a new queue's
        class after the OVSDB transaction that asked for it has returned, so this waits up
        to ``wait_s`` for them to appear, then does what it can with the classes there.
        """
        deadline = clock() + wait_s
        classes = self.classes(device)
        while not set(planned) <= classes.keys() and clock() < deadline:
            sleep(LEAF_POLL_S)
            classes = self.classes(device)
        queues = {name: found for name, found in classes.items() if name != ROOT_CLASSID}
        # A leaf that is not ours (OVS made the class, or remade it) is short whatever its
        # length; one of ours is short only if its length differs, which needs the dump.
        short = {name for name, found in queues.items() if found.leaf != leaf_handle(name)}
        unchecked = {
            name
            for name in queues.keys() - short
            if self._leaf_bytes.get((device, name)) != limit_bytes
        }
        if unchecked:
            limits = self.leaf_limits(device)
            short |= set(short_queues({n: queues[n] for n in unchecked}, limits, limit_bytes))
            self._leaf_bytes.update({(device, n): limit_bytes for n in unchecked - short})
        if not short:
            return False

        def replace(index: int) -> None:
            for name in short:
                parent = int(name.split(":")[0], 16) << 16 | int(name.split(":")[1], 16)
                self._request(
                    device,
                    partial(
                        self._ipr.tc,
                        "replace",
                        LEAF_KIND,
                        index=index,
                        parent=parent,
                        handle=leaf_handle(name),
                        limit=limit_bytes,
                    ),
                )

        self._on_port(device, replace)
        self._leaf_bytes.update({(device, name): limit_bytes for name in short})
        return True

    def ensure_root_burst(self, device: str, rate_bps: int, burst_bytes: int) -> bool:
        """Give the port's root HTB class ``burst_bytes`` of burst and cburst; True if it
        changed. The class keeps the rate OVS gave it (rate = ceil = the QoS max-rate)."""
        classes = self.classes(device)
        if ROOT_CLASSID not in classes:
            raise TcError(device, f"no HTB class {ROOT_CLASSID} (the port has no linux-htb QoS)")
        if not root_burst_short(classes, burst_bytes):
            return False
        rate = rate_bps // 8  # tc's "<n>bit" is n/8 bytes a second, rounded down

        def change(index: int) -> None:
            self._request(
                device,
                lambda: self._ipr.tc(
                    "change-class",
                    "htb",
                    index=index,
                    handle=ROOT_CLASSID,
                    parent=FILTER_PARENT,
                    rate=rate,
                    ceil=rate,
                    burst=burst_bytes,
                    cburst=burst_bytes,
                ),
            )

        self._on_port(device, change)
        return True


# ---- one socket per calling thread ---------------------------------------------------------

_local = threading.local()


def netlink() -> Netlink:
    """The calling thread's netlink socket, opened on first use."""
    handle: Netlink | None = getattr(_local, "netlink", None)
    if handle is None:
        handle = _local.netlink = Netlink()
    return handle


def close() -> None:
    """Close the calling thread's socket, if it opened one (a thread calls it as it ends)."""
    handle: Netlink | None = getattr(_local, "netlink", None)
    if handle is not None:
        _local.netlink = None
        handle.close()


def _with_socket(device: str, operation: Callable[[Netlink], _T]) -> _T:
    try:
        handle = netlink()
    except OSError as exc:  # no socket at all (out of file descriptors): this call fails
        raise TcError(device, f"netlink: {exc}") from exc
    try:
        return operation(handle)
    except TcError as exc:
        if isinstance(exc.__cause__, OSError):  # NetlinkError is not one: the kernel said no
            close()  # a broken socket: the next call opens a fresh one
        raise


def class_stats(device: str) -> dict[str, HtbClass]:
    """The port's HTB classes (rates, bursts, counters), through this thread's socket."""
    return _with_socket(device, lambda nl: nl.classes(device))


def present_keys(device: str) -> set[FilterKey]:
    return _with_socket(device, lambda nl: nl.filter_keys(device))


def ensure(device: str, filters: Sequence[TcFilter]) -> bool:
    """Make the port's filters exactly ``filters``; True when something was rewritten."""
    return _with_socket(device, lambda nl: nl.ensure_filters(device, filters))


def leaf_queue_limits(device: str) -> dict[str, int]:
    """HTB class → its ``bfifo``'s byte limit, through this thread's socket."""
    return _with_socket(device, lambda nl: nl.leaf_limits(device))


def ensure_leaf_queues(device: str, limit_bytes: int, planned: Sequence[str] = ()) -> bool:
    """A ``bfifo`` of ``limit_bytes`` under every queue class (see ``Netlink``)."""
    return _with_socket(device, lambda nl: nl.ensure_leaf_queues(device, limit_bytes, planned))


def ensure_root_burst(device: str, rate_bps: int, burst_bytes: int) -> bool:
    """Give the port's root HTB class ``burst_bytes`` of burst (see ``Netlink``)."""
    return _with_socket(device, lambda nl: nl.ensure_root_burst(device, rate_bps, burst_bytes))
