#!/usr/bin/env bash
# Start Open vSwitch unless it already answers. Nothing starts by itself on
# these machines (no systemd); ovs-ctl brings up ovsdb-server and
# ovs-vswitchd, and without the openvswitch kernel module the bridges use the
# userspace datapath (datapath_type=netdev).
set -euo pipefail
# ovs-vsctl aborts when a socket it opens gets fd 0: with standard input closed (a CI runner
# may start us so) every probe below would fail while Open vSwitch runs fine.
exec </dev/null

# Socket buffers of the userspace datapath. It reads each port through an
# AF_PACKET socket with the default receive buffer, and sends to every port
# through one AF_PACKET socket with the default send buffer. The defaults
# (208 KiB) lose packets whatever their class, before any queue: a TCP burst
# overflows a port's receive buffer, and the send buffer fills as soon as the
# HTB queues hold 208 KiB, after which sends to any port fail. Inference
# requests then wait out a 200 ms retransmission timeout behind training.
# With 8 MiB / 16 MiB packets wait in the egress class queues, where QoS acts
# on them. Sockets take the defaults when they are made: ports when they are
# added, the send socket when ovs-vswitchd starts, so a running ovs-vswitchd
# with a smaller send buffer is restarted.
RMEM=8388608
WMEM=16777216
at_least() {  # at_least NAME VALUE: raises a setting, never lowers it
  if [ "$(sysctl -n "$1")" -lt "$2" ]; then sysctl -q -w "$1=$2"; fi
}
at_least net.core.rmem_max "$RMEM"
at_least net.core.rmem_default "$RMEM"
at_least net.core.wmem_max "$WMEM"
at_least net.core.wmem_default "$WMEM"

send_buffer() {  # the send buffer of ovs-vswitchd's packet socket, 0 when there is none
  ss -0 -m -p 2>/dev/null | grep '"ovs-vswitchd"' | grep -o 'tb[0-9]*' | tr -d tb | sort -n | head -1
}
if ovs-vsctl --timeout=3 show >/dev/null 2>&1; then
  current=$(send_buffer || true)  # no packet socket yet (no port): nothing to compare
  if [ -n "$current" ] && [ "$current" -lt "$WMEM" ]; then
    echo "start-ovs: restarting ovs-vswitchd: its send buffer ($current) predates $WMEM"
    /usr/share/openvswitch/scripts/ovs-ctl stop >/dev/null 2>&1 || true
  fi
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
