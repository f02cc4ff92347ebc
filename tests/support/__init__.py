"""Helpers the tests share: a real Redis, OVS test bridges, recorded OpenFlow replies."""
