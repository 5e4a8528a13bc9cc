"""This process's resident memory from /proc/self/status (Linux), in bytes."""
from __future__ import annotations


def proc_status_bytes(field: str) -> int | None:
    """`VmRSS` (resident now) or `VmHWM` (the high-water mark); None where /proc has no such line."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss_bytes() -> int:
    """The high-water mark, or the resident size now where the kernel does not keep one."""
    peak = proc_status_bytes("VmHWM")
    if peak is not None:
        return peak
    import psutil

    return psutil.Process().memory_info().rss
