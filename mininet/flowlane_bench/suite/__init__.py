"""Scenario suite: mixed training/inference workloads run under several modes, and their report.

The modules here are the pure part (what a scenario declares, the topology it
builds, the policy each mode runs, the statistics and the report); the
Mininet runner in ``mininet/flowlane_bench/scenario.py`` is the shell that executes them.
"""
