"""The archive format: a tar of a workspace folder (zstd or gzip) and a JSON manifest beside it.

The manifest lists every member in archive order: path, type (file, dir, symlink), permission
bits, mtime, and for a file its size and sha256, for a symlink its target. The tar is ordinary
(``tar --zstd -xf`` opens it), but it is written and read here by a small strict codec rather
than ``tarfile.TarFile``: only the three member types are written and accepted, every member
is compared with its manifest entry as it streams past, and the stored bytes are hashed,
decompressed and parsed in two threads so verification costs little more than one read.

Nothing in this module follows a symlink: the folder is walked and read with directory
descriptors and ``O_NOFOLLOW``, and symlinks are stored as links.
"""

import hashlib
import json
import os
import queue
import re
import stat
import tarfile
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from typing import BinaryIO

import zstandard

from config.api.errors import DomainError
from config.safepaths import DIR_FLAGS, UnsafePath, clean_relative

FORMAT = "switchyard-archive/1"
CHUNK = 1024 * 1024
BLOCK = 512
RECORD = 20 * BLOCK  # tar pads the end of an archive to a whole record
# Level 2: on the benchmark workspace within 1% of the size `tar --zstd` (level 3) makes, for
# 30% less compression CPU, which pays for part of the hashing tar does not do (bench/ARCHIVE.md).
ZSTD_LEVEL = 2
# One compression thread per core beside the one reading and hashing: spare cores pay for the
# hashing and the re-read that tar does not do.
ZSTD_THREADS = -1
GZIP_LEVEL = 6
SUFFIXES = {"zstd": ".tar.zst", "gzip": ".tar.gz"}
MAX_PAX_BYTES = 1024 * 1024
MAX_LINK_TARGET_BYTES = 4095
FILE_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_ZERO_BLOCK = bytes(BLOCK)
_TYPES = ("file", "dir", "symlink")

Progress = Callable[[int, int], None]  # (files done, bytes done)


class ArchiveInvalid(DomainError):
    """The archive or its manifest is damaged, tampered with or unsafe: nothing is trusted."""

    def __init__(self, reason: str):
        super().__init__(f"Archive refused: {reason}.", code="conflict")
        self.reason = reason


class FolderChanged(DomainError):
    """The folder changed while it was archived: the archive may miss the change."""

    def __init__(self, reason: str):
        super().__init__(f"The folder changed while it was archived ({reason}); try again later.", code="conflict")
        self.reason = reason


@dataclass(frozen=True)
class Entry:
    path: str
    type: str  # "file", "dir" or "symlink"
    mode: int = 0o644  # permission bits only: setuid, setgid and sticky are never stored
    mtime: int = 0
    size: int = 0
    sha256: str = ""
    target: str = ""  # a symlink's target, stored as it is, never resolved

    def as_json(self) -> dict:
        data = {"path": self.path, "type": self.type, "mode": self.mode, "mtime": self.mtime}
        if self.type == "file":
            data.update(size=self.size, sha256=self.sha256)
        elif self.type == "symlink":
            data["target"] = self.target
        return data


@dataclass
class Manifest:
    compression: str
    root_mode: int
    entries: list[Entry]
    skipped: list[dict] = field(default_factory=list)  # sockets, fifos, devices: never archived

    @property
    def total_bytes(self) -> int:
        return sum(entry.size for entry in self.entries)

    def to_bytes(self) -> bytes:
        body = {
            "format": FORMAT,
            "compression": self.compression,
            "root_mode": self.root_mode,
            "files": sum(1 for entry in self.entries if entry.type == "file"),
            "bytes": self.total_bytes,
            "entries": [entry.as_json() for entry in self.entries],
            "skipped": self.skipped,
        }
        # ensure_ascii: a symlink target that is not UTF-8 travels as \udcxx escapes.
        return json.dumps(body, ensure_ascii=True, separators=(",", ":")).encode("ascii")


# --- Manifest: parse and validate before anything is written ---------------------------------


def manifest_parse(raw: bytes) -> Manifest:
    """The manifest, or ArchiveInvalid naming the first unsafe or malformed entry.

    The rules: every path is a clean relative name (``clean_relative``: no absolute path, no
    ``..``, no NUL...), appears once, and sits in a folder declared earlier as a ``dir`` entry,
    so nothing is ever written through a symlink; only files, folders and symlinks; permission
    bits only (no setuid, setgid or sticky bit).
    """
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ArchiveInvalid(f"the manifest is not JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ArchiveInvalid(f"the manifest is not a {FORMAT} manifest")
    compression = data.get("compression")
    if compression not in SUFFIXES:
        raise ArchiveInvalid(f"unknown compression {compression!r}")
    root_mode = _mode(data.get("root_mode"), "the root folder")
    raw_entries = data.get("entries")
    if not isinstance(raw_entries, list):
        raise ArchiveInvalid("the manifest has no entry list")
    seen: dict[str, str] = {}
    entries = []
    for raw_entry in raw_entries:
        entry = _entry(raw_entry)
        parent = entry.path.rpartition("/")[0]
        if parent and seen.get(parent) != "dir":
            why = "a symlink" if seen.get(parent) == "symlink" else "not a folder declared before it"
            raise ArchiveInvalid(f"{entry.path!r} is inside {parent!r}, which is {why}")
        if entry.path in seen:
            raise ArchiveInvalid(f"{entry.path!r} appears twice")
        seen[entry.path] = entry.type
        entries.append(entry)
    skipped = data.get("skipped", [])
    return Manifest(compression=compression, root_mode=root_mode, entries=entries, skipped=skipped)


def _entry(raw) -> Entry:
    if not isinstance(raw, dict):
        raise ArchiveInvalid("a manifest entry is not an object")
    path = raw.get("path")
    try:
        clean_relative(path)
    except UnsafePath as exc:
        raise ArchiveInvalid(f"member {path!r}: {exc.reason}") from None
    kind = raw.get("type")
    if kind not in _TYPES:
        raise ArchiveInvalid(f"member {path!r} is a {kind!r}; only files, folders and symlinks are restored")
    mode = _mode(raw.get("mode"), repr(path))
    mtime = raw.get("mtime", 0)
    if not _is_int(mtime):
        raise ArchiveInvalid(f"member {path!r} has a bad mtime")
    if kind == "file":
        size, sha = raw.get("size"), raw.get("sha256")
        if not _is_int(size) or size < 0 or not isinstance(sha, str) or not _SHA256.match(sha):
            raise ArchiveInvalid(f"member {path!r} has no valid size and sha256")
        return Entry(path=path, type=kind, mode=mode, mtime=mtime, size=size, sha256=sha)
    if kind == "symlink":
        target = raw.get("target")
        if not isinstance(target, str) or not target or "\x00" in target:
            raise ArchiveInvalid(f"symlink {path!r} has no valid target")
        if len(os.fsencode(target)) > MAX_LINK_TARGET_BYTES:
            raise ArchiveInvalid(f"symlink {path!r} has a target longer than {MAX_LINK_TARGET_BYTES} bytes")
        return Entry(path=path, type=kind, mode=mode, mtime=mtime, target=target)
    return Entry(path=path, type=kind, mode=mode, mtime=mtime)


def _mode(value, what: str) -> int:
    if not _is_int(value) or value < 0:
        raise ArchiveInvalid(f"{what} has no valid mode")
    if value & ~0o777:
        raise ArchiveInvalid(f"{what} has mode {value:o}: setuid, setgid and sticky bits are refused")
    return value


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- Writing: walk the folder, stream the tar, collect the manifest --------------------------


@dataclass
class Written:
    manifest: Manifest
    snapshot: dict[str, tuple]  # what the folder looked like as it was read: see folder_snapshot


def archive_write(*, root_fd: int, sink: BinaryIO, compression: str, progress: Progress | None = None) -> Written:
    """Stream the folder open at ``root_fd`` into ``sink`` as a compressed tar.

    Refuses (ArchiveInvalid) a name that restore would refuse, so nothing is deleted that could
    not come back; raises FolderChanged when a file changes while it is read.
    """
    root_stat = os.fstat(root_fd)
    entries: list[Entry] = []
    skipped: list[dict] = []
    snapshot: dict[str, tuple] = {"": _key(root_stat)}
    buffer = bytearray(CHUNK)
    done_bytes = 0
    with _compressor(compression, sink) as out:
        for parts, lstat, dir_fd in _walk(root_fd):
            path = "/".join(parts)
            _check_name(path)
            mode, mtime = stat.S_IMODE(lstat.st_mode) & 0o777, int(lstat.st_mtime)
            if stat.S_ISDIR(lstat.st_mode):
                entry = Entry(path=path, type="dir", mode=mode, mtime=mtime)
                out.write(_header(entry))
            elif stat.S_ISLNK(lstat.st_mode):
                target = os.readlink(parts[-1], dir_fd=dir_fd)
                entry = Entry(path=path, type="symlink", mode=mode, mtime=mtime, target=target)
                out.write(_header(entry))
            elif stat.S_ISREG(lstat.st_mode):
                entry, lstat = _write_file(parts, lstat, dir_fd, out, buffer)
                done_bytes += entry.size
            else:
                skipped.append({"path": path, "type": _kind_name(lstat.st_mode)})
                snapshot[path] = _key(lstat)
                continue
            entries.append(entry)
            snapshot[path] = _key(lstat, entry.target)
            if progress is not None and entry.type == "file":
                progress(len(entries), done_bytes)
        out.write(_end_of_archive(out.tell()))
    manifest = Manifest(
        compression=compression, root_mode=stat.S_IMODE(root_stat.st_mode) & 0o777, entries=entries, skipped=skipped
    )
    return Written(manifest=manifest, snapshot=snapshot)


def _write_file(parts, lstat, dir_fd: int, out, buffer: bytearray) -> tuple[Entry, os.stat_result]:
    """Stream one regular file; its header says the size it had when opened, and it must
    still have exactly that many bytes, and the same mtime and ctime, once read."""
    path = "/".join(parts)
    try:
        fd = os.open(parts[-1], FILE_READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise FolderChanged(f"{path!r} could not be opened: {exc.strerror}") from None
    with open(fd, "rb", buffering=0, closefd=True) as source:
        before = os.fstat(fd)
        if (before.st_ino, before.st_dev) != (lstat.st_ino, lstat.st_dev) or not stat.S_ISREG(before.st_mode):
            raise FolderChanged(f"{path!r} was replaced")
        mode, mtime, size = stat.S_IMODE(before.st_mode) & 0o777, int(before.st_mtime), before.st_size
        out.write(_header(Entry(path=path, type="file", mode=mode, mtime=mtime, size=size)))
        digest = hashlib.sha256()
        view = memoryview(buffer)
        remaining = size
        while remaining:
            count = source.readinto(view[: min(CHUNK, remaining)])
            if not count:
                raise FolderChanged(f"{path!r} shrank")
            digest.update(view[:count])
            out.write(view[:count])
            remaining -= count
        if source.read(1):
            raise FolderChanged(f"{path!r} grew")
        after = os.fstat(fd)
    if _key(after) != _key(before):
        raise FolderChanged(f"{path!r} was written to")
    out.write(bytes(-size % BLOCK))
    entry = Entry(path=path, type="file", mode=mode, mtime=mtime, size=size, sha256=digest.hexdigest())
    return entry, after


def _check_name(path: str) -> None:
    try:
        clean_relative(path)
    except UnsafePath as exc:
        raise ArchiveInvalid(f"{path!r} could not be restored safely ({exc.reason}); rename or remove it") from None


def _header(entry: Entry) -> bytes:
    info = tarfile.TarInfo(entry.path)
    info.mode = entry.mode
    info.mtime = entry.mtime
    if entry.type == "dir":
        info.type = tarfile.DIRTYPE
    elif entry.type == "symlink":
        info.type = tarfile.SYMTYPE
        info.linkname = entry.target
    else:
        info.size = entry.size
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def _end_of_archive(position: int) -> bytes:
    end = position + 2 * BLOCK
    return bytes(2 * BLOCK + (-end % RECORD))


def _kind_name(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device")):
        if test(mode):
            return name
    return "block device" if stat.S_ISBLK(mode) else "unknown"


def _walk(root_fd: int) -> Iterator[tuple[tuple[str, ...], os.stat_result, int]]:
    """Every name under the folder, a folder before what is in it, sorted by name.

    Yields (parts, lstat, descriptor of the folder holding it). Folders are opened with
    ``O_NOFOLLOW`` from their parent's descriptor, so a symlink swapped in is refused.
    """
    stack = [((), os.dup(root_fd), iter(sorted(os.listdir(root_fd))))]
    try:
        while stack:
            parts, fd, names = stack[-1]
            name = next(names, None)
            if name is None:
                os.close(fd)
                stack.pop()
                continue
            try:
                lstat = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                raise FolderChanged(f"{'/'.join((*parts, name))!r} disappeared") from None
            yield (*parts, name), lstat, fd
            if stat.S_ISDIR(lstat.st_mode):
                try:
                    child = os.open(name, DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise FolderChanged(f"{'/'.join((*parts, name))!r} could not be opened: {exc.strerror}") from None
                stack.append(((*parts, name), child, iter(sorted(os.listdir(child)))))
    finally:
        for _, fd, _ in stack:
            os.close(fd)


def _key(st: os.stat_result, target: str = "") -> tuple:
    """What a change to a name would alter. A folder's mtime moves when a name is added or removed."""
    return (
        stat.S_IFMT(st.st_mode),
        stat.S_IMODE(st.st_mode),
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
        st.st_ino,
        target,
    )


def folder_snapshot(root_fd: int) -> dict[str, tuple]:
    """The folder as it is now, in the form ``archive_write`` returns, without reading contents."""
    snapshot = {"": _key(os.fstat(root_fd))}
    for parts, lstat, dir_fd in _walk(root_fd):
        target = os.readlink(parts[-1], dir_fd=dir_fd) if stat.S_ISLNK(lstat.st_mode) else ""
        snapshot["/".join(parts)] = _key(lstat, target)
    return snapshot


def folder_entries(root_fd: int) -> list[Entry]:
    """The folder's entries as a manifest would list them, every file hashed (nothing written)."""
    entries = []
    buffer = bytearray(CHUNK)
    for parts, lstat, dir_fd in _walk(root_fd):
        path = "/".join(parts)
        mode, mtime = stat.S_IMODE(lstat.st_mode) & 0o777, int(lstat.st_mtime)
        if stat.S_ISDIR(lstat.st_mode):
            entries.append(Entry(path=path, type="dir", mode=mode, mtime=mtime))
        elif stat.S_ISLNK(lstat.st_mode):
            target = os.readlink(parts[-1], dir_fd=dir_fd)
            entries.append(Entry(path=path, type="symlink", mode=mode, mtime=mtime, target=target))
        elif stat.S_ISREG(lstat.st_mode):
            entries.append(_write_file(parts, lstat, dir_fd, _Discard(), buffer)[0])
    return entries


def same_content(left: list[Entry], right: list[Entry]) -> bool:
    """The same names, types, permission bits, bytes and link targets (mtimes aside)."""

    def essence(entries: list[Entry]) -> list[tuple]:
        return [(e.path, e.type, e.mode, e.size, e.sha256, e.target) for e in entries]

    return essence(left) == essence(right)


class _Discard:
    def write(self, data) -> None:
        pass


# --- Compression ------------------------------------------------------------------------------


class _Counted:
    """Counts what goes through to the sink, so the writer knows its tar offset for padding."""

    def __init__(self, sink):
        self._sink = sink
        self._written = 0

    def write(self, data) -> None:
        self._written += len(data)
        self._sink.write(data)

    def tell(self) -> int:
        return self._written


class _compressor:
    def __init__(self, compression: str, sink: BinaryIO):
        if compression == "zstd":
            cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL, threads=ZSTD_THREADS, write_checksum=True)
            self._stream = cctx.stream_writer(sink, write_size=CHUNK, closefd=False)
        elif compression == "gzip":
            self._stream = _GzipWriter(sink)
        else:
            raise ValueError(f"unknown compression {compression!r}")

    def __enter__(self) -> _Counted:
        return _Counted(self._stream)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self._stream.close()


class _GzipWriter:
    def __init__(self, sink: BinaryIO):
        self._sink = sink
        self._zlib = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: gzip framing

    def write(self, data) -> None:
        self._sink.write(self._zlib.compress(data))

    def close(self) -> None:
        self._sink.write(self._zlib.flush())


# --- Reading: decompress in a thread, parse strictly, compare with the manifest ---------------


@dataclass
class StoredDigest:
    size: int = 0
    sha256: str = ""


class _Decompressed:
    """Reads the stored bytes in a thread (hashing them, unless told not to) and hands out
    decompressed chunks."""

    _END = object()

    def __init__(self, source: BinaryIO, compression: str, *, hash_stored: bool):
        self._source = source
        self._compression = compression
        self._hash_stored = hash_stored
        self._queue: queue.Queue = queue.Queue(maxsize=8)
        self._stop = threading.Event()
        self.stored = StoredDigest()
        self._thread = threading.Thread(target=self._run, name="archive-read", daemon=True)

    def __enter__(self) -> "_Decompressed":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        while self._thread.is_alive():
            with suppress(queue.Empty):
                self._queue.get(timeout=0.05)
        self._thread.join()

    def chunks(self) -> Iterator[bytes]:
        while True:
            item = self._queue.get()
            if item is self._END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        digest = hashlib.sha256() if self._hash_stored else None
        source = _Hashing(self._source, digest)
        try:
            decompress = self._zstd if self._compression == "zstd" else self._gzip
            if not decompress(source):
                return
            while source.read(CHUNK):  # the rest is hashed too: the stored sha256 covers every byte
                pass
            self.stored = StoredDigest(size=source.size, sha256=digest.hexdigest() if digest else "")
            self._put(self._END)
        except Exception as exc:  # handed to the reading thread, which raises it
            if isinstance(exc, zstandard.ZstdError | zlib.error | EOFError):
                exc = ArchiveInvalid(f"the compressed stream is damaged ({exc})")
            self._put(exc)

    def _zstd(self, source) -> bool:
        reader = zstandard.ZstdDecompressor().stream_reader(source, read_size=CHUNK, read_across_frames=False)
        while chunk := reader.read(4 * CHUNK):
            if not self._put(chunk):
                return False
        return True

    def _gzip(self, source) -> bool:
        inflate = zlib.decompressobj(31)
        while not inflate.eof and (data := source.read(CHUNK)):
            while data and not inflate.eof:
                chunk = inflate.decompress(data, 4 * CHUNK)
                if chunk and not self._put(chunk):
                    return False
                data = inflate.unconsumed_tail
        return True


class _Hashing:
    def __init__(self, source: BinaryIO, digest):
        self._source = source
        self._digest = digest
        self.size = 0

    def read(self, size: int = -1) -> bytes:
        data = self._source.read(size)
        if self._digest is not None:
            self._digest.update(data)
        self.size += len(data)
        return data


@dataclass(frozen=True)
class Member:
    path: str
    type: str
    mode: int
    mtime: int
    size: int
    target: str


class _TarReader:
    """A strict streaming tar reader: ustar and pax headers; files, folders and symlinks only."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = chunks
        self._chunk = b""
        self._offset = 0

    def members(self) -> Iterator[tuple[Member, Iterator[memoryview]]]:
        pax: dict[str, str] = {}
        while True:
            block = self._take(BLOCK)
            if block == _ZERO_BLOCK:
                if self._take(BLOCK) != _ZERO_BLOCK:
                    raise ArchiveInvalid("a lone zero block in the middle of the archive")
                self._expect_only_zeros()
                return
            try:
                info = tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
            except tarfile.HeaderError as exc:
                raise ArchiveInvalid(f"a damaged member header ({exc})") from None
            if info.type == tarfile.XHDTYPE:
                pax = self._pax(info.size)
                continue
            member = self._member(info, pax)
            pax = {}
            content = self._content(member.size)
            yield member, content
            for _ in content:  # whatever the caller did not read
                pass
            self._take(-member.size % BLOCK)

    def _member(self, info: tarfile.TarInfo, pax: dict[str, str]) -> Member:
        path = pax.get("path", info.name)
        kinds = {tarfile.REGTYPE: "file", tarfile.AREGTYPE: "file", tarfile.DIRTYPE: "dir", tarfile.SYMTYPE: "symlink"}
        refused = {
            tarfile.LNKTYPE: "a hard link",
            tarfile.CHRTYPE: "a device node",
            tarfile.BLKTYPE: "a device node",
            tarfile.FIFOTYPE: "a fifo",
        }
        if info.type in refused:
            raise ArchiveInvalid(f"member {path!r} is {refused[info.type]}")
        if info.type not in kinds:
            raise ArchiveInvalid(f"member {path!r} has unsupported type {info.type!r}")
        kind = kinds[info.type]
        if kind == "dir":
            path = path.rstrip("/") if path != "/" else path
        if "size" in pax and not pax["size"].isdigit():
            raise ArchiveInvalid(f"member {path!r} has a damaged size")
        size = int(pax["size"]) if "size" in pax else info.size
        if kind != "file" and size:
            raise ArchiveInvalid(f"member {path!r} is a {kind} with content")
        return Member(
            path=path,
            type=kind,
            mode=info.mode,
            mtime=int(float(pax["mtime"])) if "mtime" in pax else int(info.mtime),
            size=size,
            target=pax.get("linkpath", info.linkname) if kind == "symlink" else "",
        )

    def _pax(self, size: int) -> dict[str, str]:
        if size > MAX_PAX_BYTES:
            raise ArchiveInvalid("a pax header is too large")
        raw = self._take(size)
        self._take(-size % BLOCK)
        records: dict[str, str] = {}
        position = 0
        while position < len(raw):
            length_text, space, _ = raw[position : position + 24].partition(b" ")
            if not space or not length_text.isdigit() or int(length_text) <= len(length_text) + 1:
                raise ArchiveInvalid("a damaged pax header")
            record = raw[position : position + int(length_text)]
            if not record.endswith(b"\n") or b"=" not in record:
                raise ArchiveInvalid("a damaged pax header")
            key, _, value = record[len(length_text) + 1 : -1].partition(b"=")
            records[key.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
            position += len(record)
        if any(key.startswith("GNU.sparse") for key in records):
            raise ArchiveInvalid("sparse members are not supported")
        return records

    def _take(self, size: int) -> bytes:
        if size == 0:
            return b""
        end = self._offset + size
        if end <= len(self._chunk):
            data = self._chunk[self._offset : end]
            self._offset = end
            return data
        parts = [self._chunk[self._offset :]]
        have = len(parts[0])
        while have < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                raise ArchiveInvalid("the archive ends in the middle of a member")
            parts.append(chunk)
            have += len(chunk)
        joined = b"".join(parts)
        self._chunk, self._offset = joined, size
        return joined[:size]

    def _content(self, size: int) -> Iterator[memoryview]:
        remaining = size
        while remaining:
            if self._offset >= len(self._chunk):
                chunk = next(self._chunks, None)
                if chunk is None:
                    raise ArchiveInvalid("the archive ends in the middle of a file")
                self._chunk, self._offset = chunk, 0
            take = min(remaining, len(self._chunk) - self._offset)
            yield memoryview(self._chunk)[self._offset : self._offset + take]
            self._offset += take
            remaining -= take

    def _expect_only_zeros(self) -> None:
        rest = self._chunk[self._offset :]
        while True:
            if rest.count(0) != len(rest):
                raise ArchiveInvalid("data after the end of the archive")
            rest = next(self._chunks, None)
            if rest is None:
                return


def member_check(member: Member, entry: Entry | None) -> None:
    """A member must be exactly the manifest's next entry."""
    if entry is None:
        raise ArchiveInvalid(f"member {member.path!r} is not in the manifest")
    if member.path != entry.path:
        raise ArchiveInvalid(f"member {member.path!r} where the manifest has {entry.path!r}")
    if member.mode & ~0o777:
        raise ArchiveInvalid(
            f"member {member.path!r} has mode {member.mode:o}: setuid, setgid and sticky bits are refused"
        )
    seen = (member.type, member.mode, member.size, member.target)
    wanted = (entry.type, entry.mode, entry.size, entry.target)
    if seen != wanted:
        raise ArchiveInvalid(f"member {member.path!r} differs from the manifest ({seen} != {wanted})")


Sink = Callable[[Member, Entry, Iterator[memoryview]], None]


def archive_read(
    *, source: BinaryIO, manifest: Manifest, visit: Sink | None = None, hash_stored: bool = True
) -> StoredDigest:
    """Read the stored archive, check every member against the manifest and every file's sha256.

    ``visit(member, entry, content)`` may consume the content (restore writes it out); content
    not consumed is hashed here. Returns the stored bytes' size and (with ``hash_stored``) sha256.
    """
    entries = iter(manifest.entries)
    with _Decompressed(source, manifest.compression, hash_stored=hash_stored) as stream:
        for member, content in _TarReader(stream.chunks()).members():
            entry = next(entries, None)
            member_check(member, entry)
            if member.type != "file":
                if visit is not None:
                    visit(member, entry, iter(()))
                continue
            digest = hashlib.sha256()
            hashed = _hashed(content, digest)
            if visit is not None:
                visit(member, entry, hashed)
            for _ in hashed:
                pass
            if digest.hexdigest() != entry.sha256:
                raise ArchiveInvalid(f"{member.path!r} does not match its sha256 in the manifest")
        missing = next(entries, None)
        if missing is not None:
            raise ArchiveInvalid(f"{missing.path!r} is in the manifest but not in the archive")
    return stream.stored


def _hashed(content: Iterator[memoryview], digest) -> Iterator[memoryview]:
    for piece in content:
        digest.update(piece)
        yield piece
