"""Rewrite a wheel without the files under some prefixes and with some binaries' symbol tables
stripped (``strip --strip-unneeded``: the dynamic symbols they link by stay), its RECORD to match.

    python scripts/gpu/slim_wheel.py .whl/ray-2.60.0-*.whl --drop ray/jars/ --strip ray/_raylet.so
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import zipfile
from pathlib import Path


def slim(
    wheel: Path, prefixes: list[str], binaries: list[str], replacements: list[tuple[str, str, str]] = ()
) -> tuple[int, int]:
    """Drop every member under ``prefixes``, strip the ``binaries`` and, per ``(member, old, new)``
    in ``replacements``, replace the text ``old`` (which must occur) by ``new``; the RECORD lines
    of what changed go (pip writes its own RECORD at install and checks no hash of a line that is
    absent). Returns the wheel's bytes before and after."""
    before = wheel.stat().st_size
    slimmed = wheel.with_suffix(".slim")
    changed = [*prefixes, *binaries, *(member for member, _, _ in replacements)]
    with (
        zipfile.ZipFile(wheel) as src,
        zipfile.ZipFile(slimmed, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out,
    ):
        for info in src.infolist():
            if any(info.filename.startswith(p) for p in prefixes):
                continue
            data = src.read(info)
            if info.filename in binaries:
                with tempfile.NamedTemporaryFile() as tmp:
                    tmp.write(data)
                    tmp.flush()
                    subprocess.run(["strip", "--strip-unneeded", tmp.name], check=True)
                    data = Path(tmp.name).read_bytes()
            for member, old, new in replacements:
                if info.filename == member:
                    text = data.decode()
                    if old not in text:
                        raise SystemExit(f"{wheel.name}: {member} has no {old!r} to replace")
                    data = text.replace(old, new).encode()
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if not any(line.startswith(p) for p in changed)).encode()
            out.writestr(info, data)
    os.replace(slimmed, wheel)
    return before, wheel.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--drop", action="append", default=[], help="a path prefix inside the wheel")
    parser.add_argument("--strip", action="append", default=[], help="an ELF binary inside the wheel")
    parser.add_argument(
        "--replace", nargs=3, action="append", default=[], metavar=("MEMBER", "OLD", "NEW"), help="edit a text file"
    )
    parser.add_argument(
        "--keep-only",
        nargs=2,
        metavar=("FOLDER", "NAMES"),
        help="drop every subfolder of FOLDER but the comma-separated NAMES (the files directly in FOLDER stay)",
    )
    args = parser.parse_args()
    drop = list(args.drop)
    if args.keep_only:
        folder, names = args.keep_only[0].rstrip("/") + "/", set(args.keep_only[1].split(","))
        with zipfile.ZipFile(args.wheel) as src:
            children = {n[len(folder) :].split("/")[0] for n in src.namelist() if n.startswith(folder)}
        drop += [f"{folder}{c}/" for c in sorted(children) if c not in names and not c.endswith(".py")]
    before, after = slim(args.wheel, drop, args.strip, [tuple(r) for r in args.replace])
    print(f"{args.wheel.name}: {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
