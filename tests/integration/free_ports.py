#!/usr/bin/python3
"""free_ports.py N: print the first port P such that P..P+N-1 are all free
on 127.0.0.1, or exit 1.  Used by the integration tests (lib.sh) and the
benchmark harness (contrib/bench/run.sh).

Ports are drawn from 20000 up to the kernel's ephemeral range when there is
room below it: a port found free must stay free until the mock, krelay or
HAProxy binds it (seconds later), and outgoing connections of every process
on the machine take ephemeral ports.
"""
import random
import socket
import sys


def main():
    n = int(sys.argv[1])
    lo, hi = 20000, 60000
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            eph = int(f.read().split()[0])
        if eph - n > lo + 4000:
            hi = eph
    except (OSError, ValueError, IndexError):
        pass
    rnd = random.Random()
    for _ in range(200):
        base = rnd.randrange(lo, hi - n)
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        print(base)
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
