"""How the controller's records are written to Redis and served by the API.

Each concept the controller publishes (queue statistics, a tracked flow, a
queue spec, a switch report) is one frozen dataclass, defined where the
concept lives (``qos/records.py``, ``classify/records.py``, ``qos/plan.py``,
``store/switches.py``).  pydantic serialises them, through one ``TypeAdapter``
per type built at import: the field annotations are the single statement of
their JSON names, and the API's schema is generated from the same classes.
"""

from __future__ import annotations

from pydantic import ConfigDict

RECORD_CONFIG: ConfigDict = ConfigDict(
    # Python code builds records by field name; JSON (Redis, the API) spells them by alias.
    populate_by_name=True,
    # A field with a default is still always in the answer: say so in the API's schema.
    json_schema_serialization_defaults_required=True,
)
"""The pydantic settings of every record the controller writes to Redis.

Non-finite floats are written as null (pydantic's default), the API's JSON has no
NaN either; the rates that can be unknown are typed ``float | None`` for that.  A
NaN that json.dumps wrote before pydantic did still parses (as NaN).
"""
