"""Shares between jobs: the queues of a ``share: per-job`` class, and which job uses which.

In a ``per-flow`` class (the default) every flow of the class shares one
queue, so a job that opens eight connections takes eight times the bandwidth
of a job that opens one.  A ``per-job`` class gets, on every port, one HTB
queue per registered job of the class besides its own queue, which carries
the class's unregistered flows as one more job of weight 1.  The class's
guarantee is split between them in proportion to the weights; each keeps the
class's ceiling, so a job's unused share goes to the others (HTB lends what a
queue does not use).

How a job's packets reach its queue.  The userspace datapath ignores
``set_queue``; a class is selected today by its DSCP, which table 1 writes,
and a tc u32 filter on the port's HTB qdisc that maps the DSCP to the class.
Job queues are selected the same way: each job queue has its own DSCP (one
the policy's classes leave free), the job's table-0 entries (the planner's
job entries, which already match exactly the job's flows on every switch)
write the job queue's number into the metadata instead of the class's, and
table 1 sets that queue's DSCP (and ``set_queue`` for kernel datapaths).
The alternative, u32 filters on the job's addresses and ports, was refused:
a job has up to 64 endpoints with port ranges, so it needs up to thousands
of filters per port, each walked by every packet in turn (u32 without hash
tables is linear), and it would repeat in tc the job matching the OpenFlow
entries already do, with the two free to disagree.  One filter per queue and
address family keeps the filter list as short as the queue list.  The cost:
a job's packets leave the switch carrying the job queue's DSCP rather than
the class's; every flowlane switch reclassifies them by the job's entries.

The bound, ``MAX_JOB_QUEUES`` per per-job class on a port, comes from the
smallest of the spaces a job queue takes a number in:

- DSCP: 64 code points for everything; each class takes one and each job
  queue one, so the policy check refuses per-job classes whose queues would
  not fit in the code points the classes leave free.
- table 1's metadata byte (``tables.CLASS_METADATA_MASK``): 255 queue
  numbers; bounded by the DSCPs first.
- OVS's linux-htb queue numbers (below 0xf000) and tc's class minor ids (16
  bits, ``1:fffe`` is OVS's root): far larger, never the limit.
- HTB's accuracy: a queue's rate stops being kept below about 1 % of the
  port (``MAX_WEIGHT``'s reason); 8 queues plus the unregistered one keep a
  class's shares above a ninth of it for equal weights.

Beyond the bound jobs share queues: a job's queue is the hash of its name
(SHA-256, so the same on every controller and across restarts) modulo the
bound, and a shared queue's weight is the sum of its jobs' weights; flows in
one queue share it per flow, as in a per-flow class.  Up to the bound every
job has a queue of its own: its hash's queue, or the next free one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controller.policy.jobs import JobSpec
from controller.policy.limits import DSCP_VALUES, MAX_JOB_QUEUES
from controller.policy.model import PER_JOB, Policy


@dataclass(frozen=True, slots=True)
class JobSlot:
    """One possible job queue of a per-job class: fixed by the policy alone.

    Every slot is planned in table 1 (its DSCP and queue) whether or not a job
    uses it, so a job registering changes only that job's entries and the
    port's queues, not the marking table."""

    traffic_class: str
    slot: int
    queue_id: int
    dscp: int

    @property
    def name(self) -> str:
        """The queue's name in reports and statistics: ``training/job3``."""
        return f"{self.traffic_class}/job{self.slot}"


@dataclass(frozen=True, slots=True)
class JobQueue:
    """A slot in use on every port: the jobs it carries and the sum of their weights."""

    slot: JobSlot
    jobs: tuple[str, ...]
    weight: int


def per_job_classes(policy: Policy) -> tuple[str, ...]:
    """The policy's per-job classes, in document order."""
    return tuple(name for name, c in policy.classes.items() if c.share == PER_JOB)


def free_dscps(policy: Policy) -> list[int]:
    """DSCPs no class uses, highest first (the low ones are the commonly configured)."""
    used = {c.dscp for c in policy.classes.values()}
    return [dscp for dscp in range(DSCP_VALUES - 1, -1, -1) if dscp not in used]


def job_slots(policy: Policy) -> dict[str, tuple[JobSlot, ...]]:
    """Per-job class → its ``MAX_JOB_QUEUES`` slots.

    Queue numbers follow the classes' (a class's number is its position), per-job
    classes in document order; DSCPs are the free ones in the same order.  The
    policy check makes sure there are enough; a policy without (one built in a
    test, unchecked) gets fewer slots rather than a collision.
    """
    dscps = free_dscps(policy)
    first = len(policy.classes)
    slots: dict[str, tuple[JobSlot, ...]] = {}
    for index, name in enumerate(per_job_classes(policy)):
        base = index * MAX_JOB_QUEUES
        slots[name] = tuple(
            JobSlot(name, slot, first + base + slot, dscps[base + slot])
            for slot in range(MAX_JOB_QUEUES)
            if base + slot < len(dscps)
        )
    return slots


def queue_classes(policy: Policy) -> dict[int, str]:
    """Queue number → the class whose traffic it carries, job queues included."""
    owners = {policy.queue_id(name): name for name in policy.class_names}
    for name, slots in job_slots(policy).items():
        owners.update((slot.queue_id, name) for slot in slots)
    return owners


def name_hash(name: str) -> int:
    """A job name's hash, the same in every process (Python's ``hash`` is salted)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")


def assign_slots(names: Sequence[str], count: int) -> dict[str, int]:
    """Job name → slot among ``count``, deterministic whatever the order of ``names``.

    Up to ``count`` jobs each get their own slot: the one their hash names, or
    the next free one, taking jobs in name order (so a job keeps its slot when
    others come and go, unless its own was taken first).  Beyond, each job
    goes where its hash says and jobs share.
    """
    ordered = sorted(set(names))
    if count <= 0:
        return {}
    if len(ordered) > count:
        return {name: name_hash(name) % count for name in ordered}
    taken: dict[int, str] = {}
    for name in ordered:
        slot = name_hash(name) % count
        while slot in taken:
            slot = (slot + 1) % count
        taken[slot] = name
    return {name: slot for slot, name in taken.items()}


def job_queues(policy: Policy, jobs: Sequence[JobSpec]) -> dict[str, tuple[JobQueue, ...]]:
    """Per-job class → the job queues its registered jobs use, by slot."""
    slots = job_slots(policy)
    planned: dict[str, tuple[JobQueue, ...]] = {}
    for name, class_slots in slots.items():
        weights = {job.name: job.weight for job in jobs if job.traffic_class == name}
        assigned = assign_slots(list(weights), len(class_slots))
        queues = []
        for slot in class_slots:
            members = tuple(sorted(job for job, index in assigned.items() if index == slot.slot))
            if members:
                queues.append(JobQueue(slot, members, sum(weights[job] for job in members)))
        planned[name] = tuple(queues)
    return planned


def job_queue_ids(policy: Policy, jobs: Sequence[JobSpec]) -> dict[str, int]:
    """Job name → the queue its flows go to, for the jobs of per-job classes."""
    return {
        job: queue.slot.queue_id
        for queues in job_queues(policy, jobs).values()
        for queue in queues
        for job in queue.jobs
    }


def shares(guarantee: int, queues: Sequence[JobQueue]) -> tuple[int, dict[int, int]]:
    """A class's ``guarantee`` split: (the unregistered flows' part, slot → a job queue's).

    In proportion to the weights, the unregistered flows counting as one more
    job of weight 1; rounded down, the remainder to the unregistered flows so
    the parts add up to the guarantee exactly.
    """
    total = sum(queue.weight for queue in queues) + 1
    parts = {queue.slot.slot: guarantee * queue.weight // total for queue in queues}
    return guarantee - sum(parts.values()), parts


def sharing_note(queues: Mapping[str, Sequence[JobQueue]]) -> str:
    """What a plan says when jobs share queues (more jobs than ``MAX_JOB_QUEUES``)."""
    parts = [
        f"{queue.slot.name} shared by {', '.join(queue.jobs)}"
        for class_queues in queues.values()
        for queue in class_queues
        if len(queue.jobs) > 1
    ]
    if not parts:
        return ""
    return f"more jobs than {MAX_JOB_QUEUES} job queues: " + "; ".join(parts)
