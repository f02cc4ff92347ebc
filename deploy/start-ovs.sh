#!/usr/bin/env bash
# Start Open vSwitch unless it already answers. Nothing starts by itself on
# these machines (no systemd); ovs-ctl brings up ovsdb-server and
# ovs-vswitchd, and without the openvswitch kernel module the bridges use the
# userspace datapath (datapath_type=netdev).
set -euo pipefail
if ovs-vsctl --timeout=3 show >/dev/null 2>&1; then
  exit 0
fi
/usr/share/openvswitch/scripts/ovs-ctl start --system-id=random >/dev/null 2>&1 || true
for _ in $(seq 1 50); do
  if ovs-vsctl --timeout=3 show >/dev/null 2>&1; then
    echo "start-ovs: Open vSwitch is running"
    exit 0
  fi
  sleep 0.2
done
echo "start-ovs: Open vSwitch did not start; see /var/log/openvswitch/" >&2
exit 1
