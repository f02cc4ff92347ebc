"""How often the local ovs-vswitchd refreshes flow counters, read from its OVSDB."""

from __future__ import annotations

import pytest
from flowlane_bench import harness

from controller.qos.ovsdb import Ovsdb

pytestmark = pytest.mark.ovs


def test_unset_is_the_default_half_second_and_a_setting_is_read_in_seconds() -> None:
    harness.check_prerequisites()
    with harness.max_revalidator(None):
        assert Ovsdb().revalidation_s() == 0.5
    with harness.max_revalidator(100):
        assert Ovsdb().revalidation_s() == 0.1
