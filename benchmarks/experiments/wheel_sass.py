"""SASS of the variants in a built wheel (or its unpacked folder), no GPU and no compiler needed: for each variant
whose label matches, the count of each opcode named, and the instructions at the offsets named (with the three
before each and the one after), as cuobjdump prints them. Each variant's cubin is found in libxopsaot.so by its
manifest sha256. Stop 32 read the held norms' barriers and the instructions at racecheck's reported offsets this way.

    python benchmarks/experiments/wheel_sass.py WHEEL LABEL_REGEX [--count BAR.SYNC ...] [--at 0x4f00 ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from variant_registers import INSTRUCTION, cuobjdump, opcode  # noqa: E402


def package_files(wheel: Path) -> tuple[dict, bytes]:
    """The manifest and the library of a wheel, or of a folder holding the unpacked xopsaot package."""
    if wheel.is_dir():
        return json.loads((wheel / "xopsaot/manifest.json").read_text()), (wheel / "xopsaot/libxopsaot.so").read_bytes()
    with zipfile.ZipFile(wheel) as z:
        return json.loads(z.read("xopsaot/manifest.json")), z.read("xopsaot/libxopsaot.so")


def cubins(wheel: Path, label_regex: str):
    """(label, cubin bytes) of each variant whose label matches."""
    manifest, library = package_files(wheel)
    starts = [m.start() for m in re.finditer(b"\x7fELF", library)]
    for variant in manifest["variants"]:
        if re.search(label_regex, variant["label"]):
            size = variant["size"]
            found = [s for s in starts if hashlib.sha256(library[s : s + size]).hexdigest() == variant["sha256"]]
            assert found, f"{variant['label']}: no cubin with its sha256 in the library"
            yield variant["label"], library[found[0] : found[0] + size]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("wheel", type=Path)
    parser.add_argument("label_regex")
    parser.add_argument("--count", nargs="*", default=[], help="opcodes, counted where an opcode starts with one")
    parser.add_argument("--at", nargs="*", default=[], help="offsets, hexadecimal")
    args = parser.parse_args()
    for label, binary in cubins(args.wheel, args.label_regex):
        sass = cuobjdump(binary, "-sass").splitlines()
        code = [(int(m.group(1), 16), " ".join(m.group(2).split())) for m in map(INSTRUCTION.match, sass) if m]
        counts = [f"{op} {sum(opcode(text).startswith(op) for _, text in code)}" for op in args.count]
        print(label, *counts, flush=True)
        for offset in (int(a, 16) for a in args.at):
            index = next(i for i, (address, _) in enumerate(code) if address == offset)
            for address, text in code[max(0, index - 3) : index + 2]:
                print(f"  {address:#06x}  {text}")


if __name__ == "__main__":
    main()
