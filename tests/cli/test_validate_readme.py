"""The README's ``flowlane policy validate`` example is what the command prints: one pass
lists structural and cross-field errors together, an unknown key with a did-you-mean."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from controller.cli.main import app

REPO = Path(__file__).resolve().parents[2]

# The README's bad.yaml: one out-of-range DSCP, one out-of-range port, a misspelt key,
# and, behind them, an unknown class, a shared DSCP and 120 % of guarantees.
BAD_POLICY = """\
classes:
  inference:   {priority: 0, dscp: 46, min_rate: 20%}
  training:    {priority: 1, dscp: 64, min_rate: 70%}
  best-effort: {priority: 2, dscp: 46, min_rate: 30%}
default_class: inference
rules:
  - {name: rocev2, match: {ip_proto: udp, udp_dst: 4791}, class: training}
  - {name: triton, match: {tcp_dst: [8000, 70000]}, class: inference}
  - {name: ssh, match: {tcp_dst: 22}, class: besteffort}
ports:
  rate: 10Gbit
  overides: {s1-eth4: 1Gbit}
"""


def readme_example() -> list[str]:
    """The lines of the code block after "`flowlane policy validate FILE` prints"."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("`flowlane policy validate FILE` prints")
    block = re.search(r"```\n(.*?)```", text[start:], re.DOTALL)
    assert block is not None
    return block.group(1).splitlines()


def test_the_readme_validate_example_is_what_validate_prints(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(BAD_POLICY, encoding="utf-8")
    result = CliRunner().invoke(app, ["policy", "validate", str(tmp_path / "bad.yaml")])
    assert result.exit_code == 1
    printed = " ".join(result.stderr.split())  # rich folds long lines
    header, *errors = readme_example()
    assert header == "invalid policy bad.yaml: 6 error(s)"
    # A long temporary path may be folded anywhere: compare it without whitespace.
    assert f"{tmp_path / 'bad.yaml'}:6error(s)" in "".join(result.stderr.split())
    positions = [printed.index(" ".join(line.split())) for line in errors]
    assert positions == sorted(positions)  # in the README's order
    assert any("did you mean 'overrides'?" in line for line in errors)
