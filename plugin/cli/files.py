"""Which files ``docanchor ingest`` takes from the paths it is given."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from docanchor import formats
from docanchor.display import counted

FOLDER_EXTENSIONS = frozenset(formats.extensions())
"""File name endings (lower case) taken from a folder: every extension of the format registry
(:mod:`docanchor.formats`). Other files in a folder (source code, archives...) are skipped; a file
named on the command line is tried whatever its name."""


def collect_files(paths: tuple[Path, ...]) -> tuple[list[Path], list[Path], list[Path]]:
    """Files to ingest under ``paths``, files skipped in folders, and paths that do not exist.

    Folders are walked recursively, hidden entries skipped, and give only files whose ending is in
    :data:`FOLDER_EXTENSIONS`; the others are returned as skipped. A file named in ``paths`` is
    always taken.
    """
    files: dict[Path, None] = {}
    skipped: dict[Path, None] = {}
    missing: list[Path] = []
    for p in paths:
        if is_folder(p):
            for f in sorted(p.rglob("*")):
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts):
                    if f.suffix.lower() in FOLDER_EXTENSIONS:
                        files.setdefault(f, None)
                    else:
                        skipped.setdefault(f, None)
        elif _named_file(p):
            files.setdefault(p, None)
        else:
            missing.append(p)
    return list(files), [f for f in skipped if f not in files], missing


def is_folder(path: Path) -> bool:
    """Whether ``path`` is a folder; ``False`` for a path the system refuses to look at (a name
    too long, say), which is then tried as a file and fails with its own line."""
    try:
        return path.is_dir()
    except OSError:
        return False


def _named_file(path: Path) -> bool:
    """Whether a path named on the command line is taken as a file: one that exists, or one the
    system refuses to look at (reading it later gives that file its own error line)."""
    try:
        return path.is_file()
    except OSError:
        return True


def skipped_line(skipped: list[Path]) -> str:
    """One line saying how many folder files were skipped, by ending, and why."""
    endings = Counter(f.suffix.lower() or "no ending" for f in skipped)
    kinds = ", ".join(f"{n} {ending}" for ending, n in sorted(endings.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"skipped {counted(len(skipped), 'file')} in folders that are not a document type DocAnchor reads ({kinds}); "
            f"folders give only {formats.phrase()} files: name a file itself to try it anyway.")
