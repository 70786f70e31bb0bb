"""The machine state a timed run saw, from the core-link probes bench/quiet_machine.sh wrote
beside it (NAME.link: the round trip of a cache line between the first two CPUs before and
after the run, ns). 'close' (both under 250 ns: the vCPUs shared a last-level cache), 'distant'
(both at or over it), 'changed' (one of each) or 'unknown' (no probe)."""

# Between the two states of the 2-vCPU guests in docs/performance.md: 80-170 ns and 350-600 ns.
CLOSE_NS = 250


def link_state(link_path):
    try:
        values = open(link_path).read().split()
        before, after = (int(v) for v in values)
    except (OSError, ValueError):
        return "unknown"
    close = [ns < CLOSE_NS for ns in (before, after)]
    return "close" if all(close) else "distant" if not any(close) else "changed"
