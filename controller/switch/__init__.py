"""One switch as an actor: a pure ``step(state, event, config)`` and the adapter that runs it.

``events`` is everything that reaches a switch, ``commands`` everything it asks
of the world, ``state`` what it remembers.  ``step`` is how one event changes
the state, with ``sync`` (read, plan, send the difference, confirm; ``reads``
decodes what a sync read, ``report`` builds what it tells), ``detect``
(elephant detection, port counters), ``qos`` (queues and their telemetry) and
``requests`` (xids and deadlines).  ``codec`` is the OpenFlow bytes in and out,
``qoswork`` the blocking OVSDB/tc work run off the actor, and ``actor`` the
thin shell that carries commands out.
"""
