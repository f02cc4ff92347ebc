"""The scenario modules live in mininet/ (scripts, not a package): put that folder on the path."""

from __future__ import annotations

import sys
from pathlib import Path

MININET_DIR = Path(__file__).resolve().parents[2] / "mininet"
if str(MININET_DIR) not in sys.path:
    sys.path.insert(0, str(MININET_DIR))
