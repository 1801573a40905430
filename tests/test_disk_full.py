"""A full disk: ingests end with ``507 disk_full`` and store nothing, reads and ``/healthz`` keep
answering (and ``/healthz`` says the disk is full), uploads of failed jobs are removed, and a
restart on a full disk says so.

The real-filesystem tests run ``docanchor serve`` with its data dir on a small tmpfs mounted in a
private user and mount namespace (``unshare --user --map-root-user --mount``, no privileges
needed where unprivileged user namespaces are allowed); the disk is filled with a filler file
written inside that namespace. Where namespaces are not allowed they are skipped with the reason;
the free-space check itself is also tested in process (a reserve larger than the disk's free space).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from docanchor.settings import Settings
from ingest.pipeline import make_doc_id
from plugin.api import DocAnchor
from plugin.app import create_app
from tests.conftest import CORPUS
from tests.fakes import HashEmbedder
from tests.live_server import REPO, LiveServer
from tests.waiting import BACKSTOP_S

MD = CORPUS / "md/ch04-01-what-is-ownership.md"
NORWICH = CORPUS / "txt/norwich-city.txt"


# ------------------------------------------------------------------------------- in process
def test_an_ingest_that_would_eat_the_reserve_is_refused_with_disk_full(tmp_path):
    """The free-space check, on the real disk: a reserve above its free space refuses every write."""
    from docanchor.disk import free_bytes

    settings = Settings(data_dir=tmp_path / "data")
    da = DocAnchor(settings, embedder=HashEmbedder())
    client = create_app(settings, da).test_client()
    try:
        kept = client.post("/v1/documents", data={"file": (MD.open("rb"), MD.name)}).get_json()
        assert client.get("/healthz").get_json() == {"status": "ok"}
        da.disk.min_free_bytes = free_bytes(settings.data_dir) + 2**40  # as if the disk had filled up
        refused = client.post("/v1/documents", json={"text": "# New\n\nA document that does not fit."})
        assert refused.status_code == 507
        err = refused.get_json()["error"]
        assert err["code"] == "disk_full" and "free space" in err["message"] and "Nothing was stored" in err["message"]
        assert not list((settings.data_dir / "uploads").iterdir())
        health = client.get("/healthz")
        assert health.status_code == 200 and health.get_json()["status"] == "degraded"
        assert [p["code"] for p in health.get_json()["problems"]] == ["disk_full"]
        assert [d["doc_id"] for d in client.get("/v1/documents").get_json()["documents"]] == [kept["doc_id"]]
        assert client.post("/v1/retrieve", json={"query": "ownership"}).get_json()["sections"]
        delete = client.delete(f"/v1/documents/{kept['doc_id']}")
        assert delete.status_code == 507 and delete.get_json()["error"]["code"] == "disk_full"
        da.disk.min_free_bytes = 0  # space was freed
        assert client.get("/healthz").get_json() == {"status": "ok"}
        assert client.post("/v1/documents", json={"text": "# New\n\nA document that fits now."}).status_code == 201
    finally:
        da.close()


class FillsTheDisk(HashEmbedder):
    """Calls ``fill()`` the first time the chunker counts tokens: the upload is spooled by then."""

    def __init__(self, fill) -> None:
        super().__init__()
        self.fill = fill

    def count_tokens(self, text: str) -> int:
        if self.fill is not None:
            self.fill, fill = None, self.fill
            fill()
        return super().count_tokens(text)


def test_a_job_refused_for_space_after_queuing_ends_with_disk_full(tmp_path):
    """The check before embedding (the chunks' estimated size) ends a queued job with disk_full."""
    settings = Settings(data_dir=tmp_path / "data")
    holder: list[DocAnchor] = []
    da = DocAnchor(settings, embedder=FillsTheDisk(lambda: setattr(holder[0].disk, "min_free_bytes", 2**62)))
    holder.append(da)
    try:
        job = da.submit(MD.read_bytes(), filename=MD.name, wait_s=BACKSTOP_S)
        assert job.status == "failed" and job.error_code == "disk_full" and job.error_status == 507
        assert job.stage == "embedding" and da.list_documents() == []
        assert not list((settings.data_dir / "uploads").iterdir())
    finally:
        da.close()


# ------------------------------------------------------------------------------- a real small filesystem
def _namespaces_work() -> str | None:
    """``None`` when a user+mount namespace with a tmpfs can be made here, else why not."""
    if not shutil.which("unshare") or not shutil.which("nsenter"):
        return "unshare/nsenter (util-linux) not installed"
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            "mount -t tmpfs -o size=1m tmpfs /mnt && echo ok"], capture_output=True, text=True)
    return None if probe.stdout.strip() == "ok" else f"user/mount namespaces not allowed: {probe.stderr.strip()[:200]}"


class SmallDisk:
    """A tmpfs of ``size_mb`` MiB at ``mountpoint``, inside a user+mount namespace held by a sleeping shell."""

    def __init__(self, mountpoint: Path, size_mb: int) -> None:
        self.mountpoint = mountpoint
        mountpoint.mkdir(parents=True, exist_ok=True)
        self.holder = subprocess.Popen(
            ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
             f'mount -t tmpfs -o size={size_mb}m tmpfs "{mountpoint}" && echo mounted && exec sleep 3600'],
            stdout=subprocess.PIPE, text=True)
        assert self.holder.stdout.readline().strip() == "mounted"

    @property
    def enter(self) -> list[str]:
        """The command prefix that runs a program inside the namespace (in this checkout: entering a
        mount namespace would otherwise move the working directory to ``/``)."""
        return ["nsenter", "-t", str(self.holder.pid), "-U", "-m", "--preserve-credentials", f"--wd={REPO}"]

    def run(self, script: str) -> str:
        return subprocess.run([*self.enter, "sh", "-c", script], capture_output=True, text=True, check=False).stdout

    def fill(self, leave_bytes: int = 0) -> None:
        """Write a filler file until about ``leave_bytes`` bytes are free (0: until ENOSPC)."""
        self.run(f'cd "{self.mountpoint}" && dd if=/dev/zero of=filler bs=64k 2>/dev/null; '
                 f'free=$(df -B1 --output=avail . | tail -1); give=$(( {leave_bytes} )); '
                 f'[ "$give" -gt 0 ] && truncate -s -$(( give - free > 0 ? give - free : 0 )) filler; true')

    def free(self) -> int:
        return int(self.run(f'df -B1 --output=avail "{self.mountpoint}" | tail -1').strip())

    def uploads(self) -> list[str]:
        return self.run(f'ls "{self.mountpoint}/data/uploads" 2>/dev/null').split()

    def empty(self) -> None:
        self.run(f'rm -f "{self.mountpoint}/filler"')

    def close(self) -> None:
        self.holder.kill()
        self.holder.wait()


@pytest.fixture
def small_disk(tmp_path):
    why = _namespaces_work()
    if why:
        pytest.skip(why)
    disk = SmallDisk(tmp_path / "mnt", size_mb=48)
    yield disk
    disk.close()


def _text(n: int) -> bytes:
    return f"# Report {n}\n\n".encode() + NORWICH.read_bytes().replace(b"Norwich", f"Town{n}".encode())


def _post(server: LiveServer, data: bytes, name: str, folder: Path) -> tuple[int, dict]:
    """Upload ``data`` as ``name``; a 202 is followed until its job ends (see ``LiveServer.upload``)."""
    path = folder / name
    path.write_bytes(data)
    return server.upload(path, timeout_s=BACKSTOP_S)


def _assert_serving_while_full(server: LiveServer, kept: str) -> None:
    status, health = server.json("GET", "/healthz", timeout_s=BACKSTOP_S)
    assert status == 200 and health["status"] == "degraded", health
    assert [p["code"] for p in health["problems"]] == ["disk_full"]
    status, listed = server.json("GET", "/v1/documents", timeout_s=BACKSTOP_S)
    assert status == 200 and [d["doc_id"] for d in listed["documents"]] == [kept]
    status, found = server.json("POST", "/v1/retrieve", {"query": "football club"}, timeout_s=BACKSTOP_S)
    assert status == 200 and found["sections"] and {s["doc_id"] for s in found["sections"]} == {kept}


@pytest.mark.e2e
@pytest.mark.server
def test_a_full_disk_refuses_ingests_keeps_serving_and_a_restart_says_so(small_disk, tmp_path):
    """Regression: with the data dir on a small filesystem, a document hung in "storing" for 20+
    minutes, a later DELETE never answered, /healthz timed out, uploads got 500s, and a restart said
    'store_unavailable ... try again'. Here a 48 MiB tmpfs keeps a 4 MiB reserve."""
    env = {"DOCANCHOR_MIN_FREE_DISK_BYTES": str(4 * 2**20)}
    data = small_disk.mountpoint / "data"
    server = LiveServer(data, env=env, prefix=small_disk.enter)
    try:
        server.wait_ready(timeout_s=BACKSTOP_S)
        status, kept = _post(server, _text(1), "report-1.md", tmp_path)
        assert status == 201, kept
        small_disk.fill(leave_bytes=4 * 2**20 + 256 * 1024)  # the upload fits, its chunks do not
        status, refused = _post(server, _text(2), "report-2.md", tmp_path)
        assert status == 507 and refused["error"]["code"] == "disk_full", refused
        assert "free space" in refused["error"]["message"]
        assert small_disk.uploads() == []  # the failed job's upload is gone
        _assert_serving_while_full(server, kept["doc_id"])
        status, _ = server.json("GET", f"/v1/documents/{make_doc_id(_text(2))}")
        assert status == 404  # nothing of the refused document is visible
        small_disk.fill()  # now the disk is full to the last byte
        status, refused = _post(server, _text(3), "report-3.md", tmp_path)
        assert status == 507 and refused["error"]["code"] == "disk_full", refused
        assert small_disk.uploads() == []
        status, deleted = server.json("DELETE", f"/v1/documents/{kept['doc_id']}", timeout_s=BACKSTOP_S)
        assert status == 507 and deleted["error"]["code"] == "disk_full"  # answered at once, nothing touched
        _assert_serving_while_full(server, kept["doc_id"])
    finally:
        server.stop()

    restarted = LiveServer(data, env=env, prefix=small_disk.enter)
    try:
        try:
            restarted.wait_ready(timeout_s=BACKSTOP_S)
        except RuntimeError as exc:  # it may refuse to start: then it must say the disk is full
            assert "disk_full" in str(exc) and "store_unavailable" not in str(exc), str(exc)
            assert "the disk holding it is full" in str(exc) and "start DocAnchor again" in str(exc)
        else:
            _assert_serving_while_full(restarted, kept["doc_id"])
            assert "is full" in restarted.read_log()
    finally:
        restarted.stop()

    small_disk.empty()
    recovered = LiveServer(data, env=env, prefix=small_disk.enter)
    try:
        recovered.wait_ready(timeout_s=BACKSTOP_S)
        assert recovered.json("GET", "/healthz")[1] == {"status": "ok"}
        status, again = _post(recovered, _text(2), "report-2.md", tmp_path)
        assert status == 201, again
    finally:
        recovered.stop()


@pytest.mark.e2e
@pytest.mark.server
def test_enospc_from_the_os_is_disk_full_without_a_reserve(small_disk, tmp_path):
    """With the reserve off (0), the OS's ENOSPC itself: the upload cannot be spooled, 507 at once."""
    data = small_disk.mountpoint / "data"
    server = LiveServer(data, env={"DOCANCHOR_MIN_FREE_DISK_BYTES": "0"}, prefix=small_disk.enter)
    try:
        server.wait_ready(timeout_s=BACKSTOP_S)
        status, kept = _post(server, _text(1), "report-1.md", tmp_path)
        assert status == 201, kept
        small_disk.fill()
        assert small_disk.free() < 64 * 1024
        status, refused = _post(server, _text(2) * 4, "report-2.md", tmp_path)
        assert status == 507 and refused["error"]["code"] == "disk_full", refused
        assert small_disk.uploads() == []  # no half-written upload stays
        _assert_serving_while_full(server, kept["doc_id"])
    finally:
        server.stop()


def test_a_file_replaced_atomically_is_whole_or_untouched(tmp_path: Path):
    """docanchor.disk.replaced_atomically, the one way store.json and the ONNX conversion are written:
    the new file replaces the old one whole (mode 644); a block that fails leaves the old one; no
    temporary file is left either way."""
    from docanchor.disk import replaced_atomically

    target = tmp_path / "sub" / "store.json"
    with replaced_atomically(target) as partial:
        assert partial.parent == target.parent and not target.exists()
        partial.write_text("first\n")
    assert target.read_text() == "first\n" and target.stat().st_mode & 0o777 == 0o644
    with pytest.raises(RuntimeError), replaced_atomically(target) as partial:
        partial.write_text("half")
        raise RuntimeError("the write failed")
    assert target.read_text() == "first\n"
    assert [p.name for p in target.parent.iterdir()] == ["store.json"]
