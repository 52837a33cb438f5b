"""Write a file so that readers see either the old file or the whole new one, never a part."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomically"]


def _process_umask() -> int:
    # os.umask can only be read by setting it; done once, at import, before threads are likely.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# mkstemp makes files private (0600); a finished output should get the mode any new file gets.
_NEW_FILE_MODE = 0o666 & ~_process_umask()


def write_atomically(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename it.

    A crash or an exception half-way leaves no partial file behind: the temporary file is removed
    and ``path`` keeps whatever it held before. Missing parent folders are created.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    descriptor, temporary_name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
    )
    try:
        with os.fdopen(descriptor, "wb") as temporary_file:
            temporary_file.write(payload)
            temporary_file.flush()
            os.fsync(temporary_file.fileno())
        os.chmod(temporary_name, _NEW_FILE_MODE)
        os.replace(temporary_name, target)
    except BaseException:
        Path(temporary_name).unlink(missing_ok=True)
        raise
    return target
