#!/usr/bin/env bash
# Start Open vSwitch unless it already answers. Nothing starts by itself on
# these machines (no systemd); ovs-ctl brings up ovsdb-server and
# ovs-vswitchd, and without the openvswitch kernel module the bridges use the
# userspace datapath (datapath_type=netdev).
set -euo pipefail

# The userspace datapath reads each port through an AF_PACKET socket with the
# default receive buffer (net.core.rmem_default, 208 KiB). A TCP sender's burst
# overflows it, and the packets lost there are lost before any queue: whatever
# their class, so inference requests time out (200 ms RTO) behind training
# bursts. With 8 MiB the bursts wait in the egress queues, where a switch's
# QoS acts on them. Ports take the value when they are added.
RMEM=8388608
if [ "$(sysctl -n net.core.rmem_default)" -lt "$RMEM" ]; then
  sysctl -q -w net.core.rmem_default="$RMEM"
  [ "$(sysctl -n net.core.rmem_max)" -ge "$RMEM" ] || sysctl -q -w net.core.rmem_max="$RMEM"
fi

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
