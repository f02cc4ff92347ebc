"""Secret files: created under a random name with O_EXCL | O_NOFOLLOW and mode 0600, then
renamed, so another user of a shared directory can neither pre-create the temporary file nor
redirect it through a symlink (issue 24, finding 7)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from controller.auth.files import read_token_file, write_secret_file, write_token_file
from controller.cli.up import REDIS_AUTH_CONF, write_redis_password

SECRET = "flt_the-admin-token"


def test_a_planted_symlink_at_the_old_predictable_name_gets_nothing(tmp_path: Path) -> None:
    """Before: the token went to ``.token.<pid>`` opened without O_EXCL/O_NOFOLLOW, i.e.
    through another user's symlink into a file they can read."""
    shared = tmp_path / "shared"
    shared.mkdir()
    stolen = tmp_path / "attacker-readable"
    stolen.write_text("")
    stolen.chmod(0o644)
    (shared / f".token.{os.getpid()}").symlink_to(stolen)

    write_token_file(shared / "token", SECRET)

    assert stolen.read_text() == ""
    token = shared / "token"
    assert not token.is_symlink()
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert read_token_file(token) == SECRET


def test_a_symlink_at_the_final_name_is_replaced_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("untouched\n")
    link = tmp_path / "token"
    link.symlink_to(target)

    write_token_file(link, SECRET)

    assert target.read_text() == "untouched\n"
    assert not link.is_symlink() and read_token_file(link) == SECRET


def test_temporary_names_are_random_and_opened_exclusively(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[tuple[str, int, int]] = []
    real_open = os.open

    def spy(path: str | os.PathLike[str], flags: int, mode: int = 0o777) -> int:
        opened.append((os.fspath(path), flags, mode))
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", spy)
    write_secret_file(tmp_path / "a", b"one")
    write_secret_file(tmp_path / "a", b"two")

    assert len(opened) == 2
    names = {Path(path).name for path, _, _ in opened}
    assert len(names) == 2 and not any(str(os.getpid()) == name.split(".")[-1] for name in names)
    for _, flags, mode in opened:
        assert flags & os.O_EXCL and flags & os.O_NOFOLLOW and flags & os.O_CREAT
        assert mode == 0o600
    assert (tmp_path / "a").read_bytes() == b"two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]  # no temporary left behind


def test_a_taken_random_name_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = iter(["taken", "free"])
    monkeypatch.setattr("controller.auth.files.secrets.token_hex", lambda _n: next(names))
    planted = tmp_path / ".key.taken.tmp"
    planted.write_text("planted")

    write_secret_file(tmp_path / "key", b"secret")

    assert planted.read_text() == "planted"
    assert (tmp_path / "key").read_bytes() == b"secret"


def test_mode_is_0600_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0o000)
    try:
        write_secret_file(tmp_path / "new" / "key", b"k")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "new" / "key").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700


def test_the_redis_password_file_uses_the_same_helper(tmp_path: Path) -> None:
    """redis-auth.conf goes through the same helper: a symlink planted there is replaced."""
    stolen = tmp_path / "attacker-readable"
    stolen.write_text("")
    (tmp_path / REDIS_AUTH_CONF).symlink_to(stolen)

    config, password = write_redis_password(tmp_path)

    assert stolen.read_text() == ""
    assert config.read_text() == f"requirepass {password}\n"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600 and not config.is_symlink()
