"""flowlane's benchmarks, Mininet harness and scenario runner (``mininet/flowlane_bench``).

A package of the source checkout, installed with it (``pip install -e '.[dev]'``
maps the name to this folder), and named so that it never shadows Debian's
``mininet`` library: ``mininet/`` itself has no ``__init__.py``, so with the
checkout on ``sys.path`` ``import mininet`` still finds the library.

Every script runs as a module, with the interpreter that has flowlane installed::

    .venv/bin/python -m flowlane_bench.bench_propagation --out bench-propagation.json
    .venv/bin/python -m flowlane_bench.scenario run isolation

and the processes started inside Mininet hosts (load generator, all-reduce
worker, probe) are started the same way (``harness.module_command``).
``mininet/topologies.py``, outside the package, is the file ``mn --custom`` loads.
"""
