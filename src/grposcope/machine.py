"""This machine's memory, as a run may use it: what the trainer's and the simulator's memory checks compare a
step's size with (grposcope.trainer.memory, grposcope.sim.memory). Standard library only, and below both
layers: importing it costs nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

GIB = 2**30


def available_memory() -> int | None:
    """Bytes this process can still get: free RAM (MemAvailable) and free swap, capped by the cgroup's memory
    limit (a container's, which MemAvailable does not show). Without /proc/meminfo, the physical memory; None
    where neither can be read (then nothing is checked).
    """
    free = _meminfo()
    if free is None:
        try:
            free = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):  # no sysconf (Windows), or no such name
            return None
    limit = _cgroup_limit()
    return min(free, limit) if limit is not None else free


def _meminfo() -> int | None:
    try:
        lines = Path("/proc/meminfo").read_text().splitlines()
    except OSError:
        return None
    fields = {name: int(rest.split()[0]) * 1024 for name, _, rest in (line.partition(":") for line in lines)
              if rest.split() and rest.split()[0].isdigit()}  # "MemAvailable:   23887368 kB"
    if "MemAvailable" not in fields:
        return None
    return fields["MemAvailable"] + fields.get("SwapFree", 0)


def _cgroup_limit() -> int | None:
    """The memory limit of this process's cgroup (v2 `memory.max`, v1 `memory.limit_in_bytes`), or None.
    The whole limit, not what is left of it: the check must never refuse a run that fits."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:  # "max" (v2) or ~2^63 (v1): no limit
            return int(text)
    return None


def gib(size: float) -> str:
    return f"{size / GIB:.1f} GiB"


def cpu_flags() -> set[str]:
    """The CPU's feature flags as Linux lists them in /proc/cpuinfo (empty where it cannot be read)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):  # x86 / ARM
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def native_bf16_cpu() -> bool:
    """Whether this CPU multiplies bf16 in hardware (AVX-512 BF16 or AMX on x86, the BF16 extension on ARM).
    Machines of one kind differ here, so it is read at run time. oneDNN also runs bf16 on plain AVX-512 by
    converting, which is slower than float32: that does not count."""
    return bool(cpu_flags() & {"avx512_bf16", "amx_bf16", "bf16"})
