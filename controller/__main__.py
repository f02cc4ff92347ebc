"""``python -m controller`` is the ``flowlane`` command (handy where the script is not on PATH)."""

from controller.cli.main import app

app()
