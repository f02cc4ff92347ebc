"""Flows no rule names: count them, and move the elephants out of the latency class.

Pure and clock-free: the controller reads the counting table and passes the
samples and the time in; the detector answers with the overrides to install
and to remove.  ``flows`` holds the data, ``thresholds`` the resolved policy
section, ``detector`` the state machine and ``decisions`` what it returns.
"""
