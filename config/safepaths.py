"""Every path that comes from outside goes through here.

``clean_relative`` refuses a relative path that is not plainly a name under its root (with
the reason, as a 400); ``open_beneath`` then walks it one component at a time from a
directory descriptor with ``O_NOFOLLOW``, so a symlink anywhere on the way, including one
swapped in between the check and the open, is refused by the kernel rather than followed.
Django's ``safe_join`` is not enough: it follows symlinks and lets NUL through.
"""

import errno
import os
import re
import stat
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from config.api.errors import DomainError

MAX_PATH_BYTES = 4096
MAX_COMPONENT_BYTES = 255
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_DRIVE = re.compile(r"^[A-Za-z]:")
_WINDOWS_RESERVED = re.compile(r"^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³]|conin\$|conout\$)(\..*)?$", re.IGNORECASE)
_NOT_PORTABLE = set('<>:"|?*') | {chr(c) for c in range(1, 32)} | {"\x7f"}
_DANGEROUS_AFTER_NFKC = set("./\\:%")

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(DomainError):
    def __init__(self, reason: str):
        super().__init__(f"Refused path: {reason}.", code="invalid")
        self.reason = reason


def clean_relative(raw: object, *, flat: bool = False) -> tuple[str, ...]:
    """The components of a safe relative path, or UnsafePath naming what is wrong.

    ``flat`` is for the shared workspace, where a bare filename is the whole path.
    """
    if not isinstance(raw, str):
        raise UnsafePath("the path must be a string")
    if raw == "":
        raise UnsafePath("the path is empty")
    if "\x00" in raw:
        raise UnsafePath("it contains a NUL byte")
    try:
        encoded = raw.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsafePath("it is not valid Unicode (lone surrogate)") from None
    if len(encoded) > MAX_PATH_BYTES:
        raise UnsafePath(f"it is longer than {MAX_PATH_BYTES} bytes")
    if "\ufffd" in raw:
        raise UnsafePath("it contains bytes that are not valid UTF-8 (overlong or broken encoding)")
    if _PERCENT_ESCAPE.search(raw):
        # Paths arrive decoded once already; an escape still here is double encoding
        # (%252e) or an overlong UTF-8 form (%c0%ae) that some other layer might decode.
        raise UnsafePath("it contains a percent-encoded sequence")
    if "\\" in raw:
        raise UnsafePath("it contains a backslash")
    if _DRIVE.match(raw):
        raise UnsafePath("it is a Windows drive path")
    for char in raw:
        if char.isascii():
            continue
        normalised = unicodedata.normalize("NFKC", char)
        if normalised != char and _DANGEROUS_AFTER_NFKC & set(normalised):
            raise UnsafePath(f"character U+{ord(char):04X} normalises to {normalised!r}")
    if raw.startswith("/"):
        raise UnsafePath("it is absolute")
    if raw.endswith("/"):
        raise UnsafePath("it names a folder, not a file")
    parts = tuple(raw.split("/"))
    for part in parts:
        _check_component(part)
    if flat and len(parts) > 1:
        raise UnsafePath("sub-folders are not allowed in the shared workspace: use a bare filename")
    return parts


def _check_component(part: str) -> None:
    if part == "":
        raise UnsafePath("it contains an empty component ('//')")
    base = part.split(";", 1)[0]
    if base in (".", "..") or set(part) <= {".", " "}:
        raise UnsafePath(f"it contains a '{part}' component")
    if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
        raise UnsafePath(f"a component is longer than {MAX_COMPONENT_BYTES} bytes")
    if part[-1] in ". ":
        raise UnsafePath(f"component {part!r} ends with a dot or space (Windows drops them)")
    if part[0] == " ":
        raise UnsafePath(f"component {part!r} starts with a space")
    if _WINDOWS_RESERVED.match(part):
        raise UnsafePath(f"{part!r} is a reserved device name on Windows")
    bad = _NOT_PORTABLE & set(part)
    if bad:
        shown = ", ".join(repr(c) for c in sorted(bad))
        raise UnsafePath(f"component {part!r} contains {shown}")


def _open_dir_beneath(root_fd: int, parts: tuple[str, ...], *, create: bool) -> int:
    """A descriptor for the folder ``parts`` under ``root_fd``, never through a symlink."""
    fd = os.dup(root_fd)
    try:
        for part in parts:
            try:
                next_fd = os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                # A concurrent writer may make it first; either way, open it below.
                with suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
                try:
                    next_fd = os.open(part, DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    raise DomainError(
                        f"Folder {part!r} was removed while the path was opened; retry.", code="conflict"
                    ) from None
                except OSError as exc:
                    raise _symlink_or(exc, part) from None
            except OSError as exc:
                raise _symlink_or(exc, part) from None
            os.close(fd)
            fd = next_fd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _symlink_or(exc: OSError, part: str) -> Exception:
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        return UnsafePath(f"{part!r} is a symbolic link or not a folder")
    return exc


@contextmanager
def root_descriptor(root: Path) -> Iterator[int]:
    fd = os.open(root, DIR_FLAGS)
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def parent_descriptor(root: Path, parts: tuple[str, ...], *, create: bool = False) -> Iterator[int]:
    """A descriptor for the folder that holds ``parts[-1]``; the caller opens the name itself."""
    with root_descriptor(root) as root_fd:
        fd = _open_dir_beneath(root_fd, parts[:-1], create=create)
        try:
            yield fd
        finally:
            os.close(fd)


def open_file_beneath(root: Path, parts: tuple[str, ...]) -> int:
    """Open a regular file for reading under ``root``; refuses symlinks and non-files."""
    with parent_descriptor(root, parts) as dir_fd:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
        except OSError as exc:
            raise _symlink_or(exc, parts[-1]) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafePath(f"{parts[-1]!r} is not a regular file")
    return fd


def resolve_under_roots(destination: object, roots: list[Path]) -> tuple[Path, tuple[str, ...]]:
    """For an absolute destination: the configured root it lies in and its clean parts."""
    if not isinstance(destination, str) or not destination.startswith("/"):
        raise UnsafePath("the destination must be an absolute path inside an export root")
    for root in roots:
        prefix = str(root).rstrip("/") + "/"
        if destination.startswith(prefix):
            return root, clean_relative(destination[len(prefix) :])
    raise UnsafePath("the destination is not inside any configured export root")
