#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian 12 / Ubuntu 22.04+ machine, as root:
# installs the Debian packages flowlane needs (only those missing), creates
# .venv on Debian's python3 with system site-packages (Debian's mininet is
# importable there), and installs flowlane into it when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  openvswitch-switch   # the switch (userspace datapath here: no kernel module needed)
  python3-openvswitch  # the controller's OVSDB client (ovs.db.idl), matching the switch's OVS
  mininet              # topologies; its Python package serves the venv via system site-packages
  redis-server         # policy store and bus of the REST API
  iperf3               # training traffic in scenarios
  iputils-ping         # Mininet's pingall
  ethtool              # TX checksum offload off on Mininet hosts
  iproute2             # tc filters, network namespaces
  python3              # Debian's interpreter: the one that sees Debian's mininet
  python3-venv
  prometheus           # promtool checks the alert rules; a test scrapes flowlane with it
  systemd              # systemd-analyze verifies the units in deploy/systemd
  slurm-wlm            # slurmctld, slurmd, srun: tests/deploy/test_slurm.py runs deploy/slurm
  munge                # Slurm's authentication, started by that test with its own key
  curl                 # what deploy/slurm's prolog and epilog call the API with
  make
)

missing=()
for package in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PYTHON=/usr/bin/python3
if [[ ! -x .venv/bin/python ]] || ! .venv/bin/python -c "import mininet.net" 2>/dev/null; then
  echo "setup: creating .venv"
  rm -rf .venv
  "$PYTHON" -m venv --system-site-packages .venv
fi

stamp=.venv/.flowlane-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [[ ! -f $stamp ]] || [[ $(cat "$stamp") != "$want" ]]; then
  echo "setup: installing flowlane and its dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e '.[dev]'
  echo "$want" >"$stamp"
fi
