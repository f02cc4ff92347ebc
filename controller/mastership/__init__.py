"""Several controllers, one fabric: instance leases in Redis, and who masters which switch.

``assign`` (pure) splits the switches between the live instances; ``decide`` (pure)
turns one renewal's reading of Redis into what this instance does (take a
generation, release a switch, the role of each switch); ``leases`` is the thin
Redis part (the lease, the fenced generation counter, the owners); ``presence``
tells a killed instance (its connections to Redis gone) from a paused one, so a
killed one's switches are taken within a watch, not a TTL; ``keeper`` runs the
renewals and the watch; ``pins`` and ``hosts`` share placed elephants and learned
hosts between instances, fenced by each switch's generation; ``changes`` and
``view`` are what operators see.
"""
