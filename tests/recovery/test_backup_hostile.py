"""``backup`` against a hostile folder, a hostile umask, junk beside its backups, and itself.

Real other users (``nobody``, via a forked child that drops root), real
concurrent processes, real system calls (``strace``) -- nothing is mocked.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from hermes_store import SessionDB
from hermes_store.tools.backup import backup, backups_in
from hermes_store.tools.backup_folder import UnsafeBackupFolderError
from tests.support.paths import REPO, SUPPORT
from tests.support.unprivileged import as_other_user, give_to_other_user, other_user, shared_folder

pytestmark = pytest.mark.sqlite_only("backup files of a SQLite store")

PAUSED_BACKUP = SUPPORT / "paused_backup.py"


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1", **extra}


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hermes_store.cli", *args],
        capture_output=True,
        text=True,
        env=_env(**env),
        timeout=300,
    )


def _store(path: Path, messages: int = 1) -> None:
    db = SessionDB(path)
    db.create_session("s1", "cli")
    for number in range(messages):
        db.append_message("s1", "user", f"m{number}")
    db.close()


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_to_a_symlink_to_another_users_open_folder_is_refused_and_nothing_lands_there(
    tmp_path: Path,
) -> None:
    """Before, the symlink was followed and the backup written into nobody's 0777 folder."""
    path = tmp_path / "state.db"
    _store(path)
    with shared_folder() as shared:
        theirs = shared / "theirs"

        theirs.mkdir()
        give_to_other_user(theirs)
        assert as_other_user(lambda: theirs.chmod(0o777)) == ("ok", None)  # as they would
        link = tmp_path / "backups"
        link.symlink_to(theirs)
        with pytest.raises(UnsafeBackupFolderError) as refused:
            backup(path, link)
        said = str(refused.value)
        assert str(link) in said and str(theirs) in said
        assert "nobody" in said and "0777" in said and "folder of your own" in said
        assert list(theirs.iterdir()) == []
        done = _cli("backup", "--db", str(path), "--to", str(link))
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert "nobody" in done.stderr + done.stdout
        assert list(theirs.iterdir()) == []


def test_a_folder_of_ours_that_others_may_write_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _store(path)
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(UnsafeBackupFolderError, match="0777"):
        backup(path, folder)
    folder.chmod(0o1777)  # sticky is not enough: others can still plant names there
    with pytest.raises(UnsafeBackupFolderError):
        backup(path, folder)
    relative = Path(os.path.relpath(folder))  # 'backup --to open', typed from its parent
    with pytest.raises(UnsafeBackupFolderError) as refused:
        backup(path, relative)
    assert "symbolic link" not in str(refused.value), "a relative path is not a link"
    assert list(folder.iterdir()) == []
    folder.chmod(0o700)
    assert backup(path, folder).path.parent == folder


def test_under_umask_000_every_folder_backup_makes_is_0700(tmp_path: Path) -> None:
    """Before, ``mkdir(parents=True)`` left each parent it made (and a new HERMES_HOME) 0777."""
    path = tmp_path / "state.db"
    _store(path)
    home = tmp_path / "new" / "hermes-home"
    script = (
        "import os, sys; os.umask(0); from hermes_store.tools.backup import backup; "
        "backup(sys.argv[1]); backup(sys.argv[1], sys.argv[2])"
    )
    elsewhere = tmp_path / "made" / "by" / "backup"
    done = subprocess.run(
        [sys.executable, "-c", script, str(path), str(elsewhere)],
        capture_output=True,
        text=True,
        env=_env(HERMES_HOME=str(home)),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    made = [home.parent, home, home / "backups", *list(elsewhere.parents)[:3], elsewhere]
    assert {folder: oct(mode(folder)) for folder in made} == {folder: "0o700" for folder in made}
    assert [mode(p) for p in (*backups_in(home / "backups", "state"),)] == [0o600]


def test_empty_files_named_like_future_backups_cost_no_good_backup(tmp_path: Path) -> None:
    """Before, two empty ``state-2099…db`` files made ``--keep 2`` delete the good backup and
    the one it had just verified, then fail with No such file or directory."""
    path = tmp_path / "state.db"
    _store(path)
    folder = tmp_path / "backups"
    good = backup(path, folder).path
    junk = [folder / f"state-2099010{day}T000000.000000Z.db" for day in (1, 2)]
    for name in junk:
        name.write_bytes(b"")
    done = _cli("backup", "--db", str(path), "--to", str(folder), "--keep", "2")
    assert done.returncode == 0, done.stderr
    made = Path(re.findall(r" to (\S+\.db) ", done.stdout)[0])
    assert good.exists() and made.exists() and made != good
    assert backups_in(folder, "state") == [good, made]
    assert all(name.exists() for name in junk), "files it did not make are not its to delete"
    done = _cli("backup", "--db", str(path), "--to", str(folder), "--keep", "1")
    assert done.returncode == 0, done.stderr
    newest = Path(re.findall(r" to (\S+\.db) ", done.stdout)[0])
    assert backups_in(folder, "state") == [newest] and all(name.exists() for name in junk)


def test_concurrent_keep_1_runs_all_succeed_and_leave_one_backup(tmp_path: Path) -> None:
    """Before, 3 of 6 concurrent ``--keep 1`` runs failed: each deleted the other's new file."""
    path = tmp_path / "state.db"
    _store(path, messages=50)
    folder = tmp_path / "backups"
    folder.mkdir(mode=0o700)
    arguments = ["-m", "hermes_store.cli", "backup", "--db", str(path), "--to", str(folder)]
    for _round in range(3):
        runs = [
            subprocess.Popen(
                [sys.executable, *arguments, "--keep", "1"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=_env(),
            )
            for _ in range(3)
        ]
        outcomes = [(run.wait(timeout=300), *run.communicate()) for run in runs]
        assert [code for code, _out, _err in outcomes] == [0, 0, 0], outcomes
        assert len(backups_in(folder, "state")) == 1
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace counts the real fsync calls")
def test_the_partial_is_flushed_and_set_private_through_its_descriptor(tmp_path: Path) -> None:
    """Each system call of a real backup process: the partial file is fsync'd, made 0600 with
    ``fchmod`` (never ``chmod`` by name, which a swapped name would redirect), and the folder
    is fsync'd after the backup is put in place."""
    path = tmp_path / "state.db"
    _store(path)
    folder = tmp_path / "backups"
    folder.mkdir(mode=0o700)
    traced = subprocess.run(
        [
            "strace",
            "-f",
            "-y",
            "-qq",
            "-e",
            "trace=fsync,fdatasync,chmod,fchmodat,fchmod",
            sys.executable,
            "-c",
            "import sys; from hermes_store.tools.backup import backup; "
            "backup(sys.argv[1], sys.argv[2])",
            str(path),
            str(folder),
        ],  # fmt: skip
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert traced.returncode == 0, traced.stderr
    calls = traced.stderr.splitlines()
    partial = [line for line in calls if ".partial>" in line or '.partial"' in line]
    assert any(re.search(r"\bf(data)?sync\(\d+<[^>]*\.partial>\) = 0", c) for c in partial), calls
    assert any(re.search(r"\bfchmod\(\d+<[^>]*\.partial>, 0600\) = 0", c) for c in partial), calls
    assert not [c for c in partial if re.search(r"\b(f?chmodat?)\((AT_FDCWD|\")", c)], calls
    assert any(re.search(rf"\bfsync\(\d+<{re.escape(str(folder))}>\) = 0", c) for c in calls)


def test_a_running_backups_partial_survives_another_backups_cleanup(tmp_path: Path) -> None:
    """A real second backup process, paused while it holds its partial file, outlives a
    whole backup run (with its stale-partial sweep and rotation) in the same folder."""
    path = tmp_path / "state.db"
    _store(path, messages=20)
    folder = tmp_path / "backups"
    folder.mkdir(mode=0o700)
    paused = subprocess.Popen(
        [sys.executable, str(PAUSED_BACKUP), str(path), str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert paused.stdin is not None and paused.stdout is not None
    try:
        held = Path(paused.stdout.readline().strip())
        assert held.parent == folder and held.name.endswith(".partial") and held.exists()
        other = backup(path, folder, keep=1)
        assert held.exists(), "the sweep took a live backup's partial for a stale one"
        paused.stdin.write("go\n")
        paused.stdin.flush()
        out, err = paused.communicate(timeout=120)
    finally:
        if paused.poll() is None:
            paused.kill()
            paused.wait()
    assert paused.returncode == 0, err
    finished = Path(out.strip())
    assert backups_in(folder, "state") == [finished] and finished != other.path
    assert not held.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_a_backup_is_never_written_into_a_folder_another_user_owns_even_if_we_may_write(
    tmp_path: Path,
) -> None:
    """A folder nobody owns but has opened to us (0770 with our group) is still theirs."""
    path = tmp_path / "state.db"
    _store(path)
    with shared_folder() as shared:
        theirs = shared / "theirs"
        theirs.mkdir()
        uid, _gid = other_user()
        os.chown(theirs, uid, os.getgid())
        theirs.chmod(0o770)
        with pytest.raises(UnsafeBackupFolderError, match="owned by nobody"):
            backup(path, theirs)
        assert list(theirs.iterdir()) == []


def test_a_backup_puts_its_copy_in_place_and_rotates_under_the_folders_lock(
    tmp_path: Path,
) -> None:
    """Two runs rotating at once could each delete the other's new backup (``--keep 1``
    left none); so linking into place and rotating happen under the folder's ``flock``."""
    path = tmp_path / "state.db"
    _store(path)
    folder = tmp_path / "backups"
    folder.mkdir(mode=0o700)
    paused = subprocess.Popen(
        [sys.executable, str(PAUSED_BACKUP), str(path), str(folder), "link"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert paused.stdin is not None and paused.stdout is not None
    probe = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert paused.stdout.readline().strip().endswith(".partial")
        with pytest.raises(BlockingIOError):
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        paused.stdin.write("go\n")
        paused.stdin.flush()
        out, err = paused.communicate(timeout=120)
        assert paused.returncode == 0, err
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when it finished
    finally:
        os.close(probe)
        if paused.poll() is None:
            paused.kill()
            paused.wait()
    assert backups_in(folder, "state") == [Path(out.strip())]


def test_a_name_put_at_the_final_name_meanwhile_is_never_replaced(tmp_path: Path) -> None:
    """A backup paused (a real process) just before it links its copy into place finds a
    symbolic link at its final name: the link and its target stay as they were, the run
    fails with a store error, and no partial is left behind."""
    path = tmp_path / "state.db"
    _store(path)
    folder = tmp_path / "backups"
    folder.mkdir(mode=0o700)
    target = tmp_path / "elsewhere.db"
    target.write_bytes(b"not to be touched")
    paused = subprocess.Popen(
        [sys.executable, str(PAUSED_BACKUP), str(path), str(folder), "link"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert paused.stdin is not None and paused.stdout is not None
    try:
        held = Path(paused.stdout.readline().strip())
        final = folder / re.sub(r"^\.(.*Z)\.\d+\.partial$", r"\1.db", held.name)
        final.symlink_to(target)
        paused.stdin.write("go\n")
        paused.stdin.flush()
        _out, err = paused.communicate(timeout=120)
    finally:
        if paused.poll() is None:
            paused.kill()
            paused.wait()
    assert paused.returncode != 0 and "BackupError" in err and "already exists" in err, err
    assert final.is_symlink() and target.read_bytes() == b"not to be touched"
    assert sorted(p.name for p in folder.iterdir()) == [final.name]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_a_folder_this_user_may_not_enter_is_a_store_error_not_an_oserror(
    tmp_path: Path,
) -> None:
    with shared_folder() as shared:
        path = shared / "state.db"
        _store(path)
        give_to_other_user(path)
        private = shared / "roots"
        private.mkdir(mode=0o700)
        kind, said = as_other_user(lambda: backup(path, private))
        assert kind == "BackupError" and str(private) in said, (kind, said)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and util-linux setpriv to act as another user",
)
def test_a_store_this_user_cannot_read_is_a_named_error_and_leaves_no_folder() -> None:
    """Before, ``backup`` of a 0600 file of root's, run by another user, raised the driver's
    bare ``OperationalError`` (the CLI printed a traceback) and left an empty backup folder."""
    with shared_folder() as shared:
        path = shared / "state.db"
        _store(path)
        path.chmod(0o600)
        folder = shared / "backups"
        shared.chmod(0o777)

        def attempt() -> str:
            from hermes_store.errors import StoreError

            try:
                backup(path, folder)
            except StoreError as error:
                return f"{type(error).__name__}: {error}"
            return "backed up"

        outcome, said = as_other_user(attempt)
        assert outcome == "ok", said
        assert "BackupError" in said and str(path) in said and "uid 0" in said
        assert not folder.exists()
        uid, gid = other_user()
        done = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", sys.executable]
            + ["-m", "hermes_store.cli", "backup", "--db", str(path), "--to", str(folder)],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=300,
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith("error: ") and str(path) in done.stderr
        assert not folder.exists()
