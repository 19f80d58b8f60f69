"""Uploaded zip archives, opened under limits, and the per-request folders they unpack into.

Every zip CapLens accepts (benchmark files and images to analyze, fine-tuning sets, imports)
is checked by :func:`check_archive` before any member is read: the number of members, their
total uncompressed size, each member's compression ratio and the whole archive's are bounded
(a zip bomb is refused from its directory, before anything is decompressed, whether it is one
huge member or many small ones), and a member whose name is absolute or
climbs out with ``..`` is refused by name rather than silently remapped. :func:`extract_zip`
then writes the members, counting the bytes really written against the same limits (a
member's declared size can lie).

:func:`upload_folder` gives one request its own temporary folder of uploads and removes it
when the request ends, whether it succeeded or failed.

The limits come from the environment (``CAPLENS_ZIP_MAX_MEMBERS``, ``CAPLENS_ZIP_MAX_BYTES``,
``CAPLENS_ZIP_MAX_RATIO``) or the ``[limits]`` table of the data directory's config.toml
(``zip_max_members``, ``zip_max_bytes``, ``zip_max_ratio``), else the defaults below.
"""
from __future__ import annotations

import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from scoring.paths import configured_limit

DEFAULT_MAX_MEMBERS = 20_000
DEFAULT_MAX_BYTES = 2 << 30  # 2 GiB unpacked
DEFAULT_MAX_RATIO = 100.0  # text compresses ~5-20x, images ~1x; bombs compress 1000x and more
RATIO_FLOOR = 1 << 20  # members smaller than 1 MiB may compress as well as they like
COPY_CHUNK = 1 << 20


class ArchiveError(ValueError):
    """A zip that is refused; the message is for the user."""


@dataclass(frozen=True)
class ZipLimits:
    max_members: int
    max_bytes: int
    max_ratio: float


def zip_limits() -> ZipLimits:
    """The configured limits (environment, then config.toml [limits], then the defaults)."""
    return ZipLimits(configured_limit("zip_max_members", DEFAULT_MAX_MEMBERS),
                     configured_limit("zip_max_bytes", DEFAULT_MAX_BYTES),
                     configured_limit("zip_max_ratio", DEFAULT_MAX_RATIO))


def member_path(name: str, archive_name: str = "zip") -> PurePosixPath:
    """The relative path a member may be written to; ArchiveError for absolute names and
    names with '..' (backslashes count as separators, as Windows tools write them)."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        raise ArchiveError(f"{archive_name}: refuses the member {name!r}: its path leaves the archive's folder")
    return path


def check_archive(archive: zipfile.ZipFile, archive_name: str = "zip", limits: ZipLimits | None = None,
                  whole: bool = True) -> list[zipfile.ZipInfo]:
    """The archive's members after checking names, count, ratios and (when the `whole` archive
    is to be unpacked, not read one bounded member at a time) the total size, all from its
    directory (nothing is decompressed); ArchiveError says which limit a zip breaks."""
    limits = limits or zip_limits()
    members = archive.infolist()
    if len(members) > limits.max_members:
        raise ArchiveError(f"{archive_name}: {len(members):,} members; the limit is {limits.max_members:,}")
    total = packed = 0
    for info in members:
        member_path(info.filename, archive_name)
        total += info.file_size
        packed += info.compress_size
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > RATIO_FLOOR and ratio > limits.max_ratio:
            raise ArchiveError(f"{archive_name}: member {info.filename!r} unpacks {ratio:,.0f} times its compressed "
                               f"size; the limit is {limits.max_ratio:g} (a zip bomb?)")
    ratio = total / max(packed, 1)
    if total > RATIO_FLOOR and ratio > limits.max_ratio:
        raise ArchiveError(f"{archive_name}: its {len(members):,} members unpack {ratio:,.0f} times their compressed "
                           f"size; the limit is {limits.max_ratio:g} (a zip bomb?)")
    if whole and total > limits.max_bytes:
        raise ArchiveError(f"{archive_name}: unpacks to {total / 2**20:,.0f} MB; the limit is "
                           f"{limits.max_bytes / 2**20:,.0f} MB")
    return members


def open_zip(path: Path) -> zipfile.ZipFile:
    """`path` opened as a zip, or ArchiveError when it is not one."""
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ArchiveError(f"{Path(path).name}: not a readable zip file ({exc})") from None


def extract_zip(path: Path, folder: Path, limits: ZipLimits | None = None) -> list[Path]:
    """Extract the zip at `path` into `folder` under the limits; the files written."""
    limits = limits or zip_limits()
    name = Path(path).name
    written: list[Path] = []
    total = 0
    folder.mkdir(parents=True, exist_ok=True)
    with open_zip(path) as archive:
        for info in check_archive(archive, name, limits):
            target = folder / member_path(info.filename, name)
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                with archive.open(info) as source, target.open("wb") as sink:
                    while chunk := source.read(COPY_CHUNK):
                        total += len(chunk)
                        if total > limits.max_bytes:
                            raise ArchiveError(f"{name}: unpacks to more than {limits.max_bytes / 2**20:,.0f} MB")
                        sink.write(chunk)
            except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
                raise ArchiveError(f"{name}: member {info.filename!r} cannot be read ({exc})") from None
            written.append(target)
    return written


@contextmanager
def upload_folder(prefix: str = "caplens-upload-") -> Iterator[Path]:
    """A new temporary folder for one request, removed when the block ends, however it ends."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def gathered_uploads(paths: Sequence[Path], *, folder: bool = False,
                     prefix: str = "caplens-upload-") -> Iterator[Path | None]:
    """The uploads of one request as one path: None without uploads; a single file that is not
    a zip as it is (unless `folder`); otherwise a temporary folder with the zips extracted
    (under the limits) and the other files copied, removed when the block ends."""
    if not paths:
        yield None
        return
    if len(paths) == 1 and Path(paths[0]).suffix.lower() != ".zip" and not folder:
        yield Path(paths[0])
        return
    with upload_folder(prefix) as gathered:
        for path in map(Path, paths):
            if path.suffix.lower() == ".zip":
                extract_zip(path, gathered)
            else:
                shutil.copy(path, gathered / path.name)
        yield gathered
