"""``mn --custom mininet/topologies.py``: flowlane's topologies, host, tests and cleanup for ``mn``.

    mn --custom mininet/topologies.py --topo flowlane-leafspine,2,2,2 \\
       --switch ovs,datapath=user,protocols=OpenFlow13 --controller remote \\
       --test fabric-ready+pingall+iperf3

The code is ``flowlane_bench.topologies`` (``mininet/flowlane_bench/topologies.py``,
documented there); this file only hands ``mn`` the names it reads: ``topos``,
``hosts``, ``tests`` and ``cleanup``.

Why this file finds the package itself: ``mn`` runs Debian's ``/usr/bin/python3``,
not the venv, so ``flowlane_bench`` is not installed for it; and it exec's this
file without ``__file__``.  The code object still knows which file it was
compiled from, so the package is imported by name from its folder next to this
file (``flowlane_bench.topologies`` and the topology plans it uses,
``flowlane_bench.suite.topology``, need only the standard library and Mininet).
Nothing is added to ``sys.path``: no other module of the checkout becomes
importable, and nothing can shadow the ``mininet`` library.  Under the venv (or
any interpreter that has flowlane installed) the installed package is used.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _import_from(name: str, folder: Path) -> None:
    """Import package ``name`` from ``folder`` unless this interpreter can import it already."""
    if importlib.util.find_spec(name) is not None:
        return
    init = folder / "__init__.py"
    spec = importlib.util.spec_from_file_location(
        name, init, submodule_search_locations=[str(folder)]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {name} from {init}", name=name, path=str(init))
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package  # its submodules are then found through its __path__
    spec.loader.exec_module(package)


_HERE = Path(sys._getframe().f_code.co_filename).resolve().parent
_import_from("flowlane_bench", _HERE / "flowlane_bench")
del _import_from, _HERE  # `mn` takes every name of this file into its globals

from flowlane_bench.topologies import cleanup, hosts, tests, topos  # noqa: E402

__all__ = ["cleanup", "hosts", "tests", "topos"]
