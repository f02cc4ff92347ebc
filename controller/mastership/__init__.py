"""Several controllers, one fabric: instance leases in Redis, and who masters which switch.

``assign`` (pure) splits the switches between the live instances; ``decide`` (pure)
turns one renewal's reading of Redis into what this instance does (take a
generation, release a switch, the role of each switch); ``leases`` is the thin
Redis part (the lease, the fenced generation counter, the owners).
"""
