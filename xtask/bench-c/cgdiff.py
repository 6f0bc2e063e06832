#!/usr/bin/env python3
"""Where one phase's instructions go, per instruction: the Ir difference of two callgrind runs
(--dump-instr=yes) of the same binary at N and 2N, divided by N, printed next to objdump's
disassembly of one function. The per-instruction recipe of
docs/performance.md, "Reproducing".

Usage: cgdiff.py BINARY CALLGRIND_OUT_N CALLGRIND_OUT_2N N 'FUNCTION' (a name as `nm -C`
prints it, e.g. 'uverbs::cq::poll_efa'). Cost lines of calls (inclusive cost) are skipped.
"""
import re, subprocess, sys
from collections import defaultdict

def parse(path):
    costs = defaultdict(int)
    addr = 0
    incall = False
    def val(tok, prev):
        if tok == '*': return prev
        if tok[0] in '+-': return prev + int(tok, 0)
        return int(tok, 0)
    with open(path) as f:
        for line in f:
            if not line or not (line[0].isdigit() or line[0] in '+-*'):
                if line.startswith('calls='): incall = True
                continue
            parts = line.split()
            a = val(parts[0], addr)
            addr = a
            if incall:
                incall = False  # inclusive cost of a call line: skip
                continue
            if len(parts) >= 3:
                costs[a] += int(parts[2])
    return costs

binary, f1, f2, n, sym = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
c1, c2 = parse(f1), parse(f2)
dis = subprocess.run(['objdump', '-d', '--no-show-raw-insn', '-C', binary], capture_output=True, text=True).stdout
out = []; inside = False; total = 0.0
for line in dis.splitlines():
    m = re.match(r'^([0-9a-f]+) <(.*)>:$', line)
    if m:
        inside = (m.group(2) == sym)
        if inside: out.append(line)
        continue
    if inside:
        m = re.match(r'^\s+([0-9a-f]+):\s*(.*)$', line)
        if not m: continue
        a = int(m.group(1), 16)
        d = (c2.get(a, 0) - c1.get(a, 0)) / n
        total += d
        out.append(f"{d:7.2f}  {m.group(1)}: {m.group(2)}")
print("\n".join(out))
print(f"total per op in {sym}: {total:.2f}")
