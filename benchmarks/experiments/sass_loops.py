"""SASS instructions in each loop of a kernel's sm_90 variants, compiled from a kernels directory; no GPU needed.
A loop is a backward branch; it prints the loop's address range, its instruction count and its commonest opcodes
(stop 30 counted the paged one-wave decode loop of attn_fwd this way: 689 instructions per key block before its
offsets were hoisted, 439 after, the contiguous loop 334).

    python benchmarks/experiments/sass_loops.py KERNEL LABEL_REGEX [--source kernels_src]

--source compiles another kernels directory (e.g. `git archive REV kernels_src | tar -x -C DIR`) with this tree's
aot/; its files import each other from that directory. Where REV's aot/ differs, run a copy of the script (and
variant_registers.py) inside REV's tree instead.
"""

from __future__ import annotations

import collections
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from variant_registers import INSTRUCTION, compiled_from_command_line, cuobjdump, opcode  # noqa: E402


def loops(sass: str) -> list[tuple[int, int, collections.Counter]]:
    """(start, end, opcode counts) of every range a backward branch closes."""
    code = [(int(m.group(1), 16), m.group(2)) for m in map(INSTRUCTION.match, sass.splitlines()) if m]
    found = []
    for address, text in code:
        target = re.search(r"BRA.*0x([0-9a-f]+)", text)
        if target and int(target.group(1), 16) < address:
            start = int(target.group(1), 16)
            body = [t for a, t in code if start <= a <= address]
            opcodes = collections.Counter(opcode(t).split(".")[0] for t in body)
            found.append((start, address, opcodes))
    return found


def main() -> None:
    for label, binary in compiled_from_command_line():
        sass = cuobjdump(binary, "-sass")
        print(label, flush=True)
        for start, end, opcodes in loops(sass):
            common = ", ".join(f"{name} {n}" for name, n in opcodes.most_common(8))
            print(f"  loop {start:#x}-{end:#x}: {sum(opcodes.values())} instructions ({common})", flush=True)


if __name__ == "__main__":
    main()
