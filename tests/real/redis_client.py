#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Minimal RESP client (stdlib only) for tests/real/redis_check.sh.

  redis_client.py PORT write N      write N keys kvt:key:<i> with values
                                    derived from i (1..2048 bytes), pipelined
  redis_client.py PORT verify N     SCAN every key, MGET them in batches of
                                    500, compare with what `write` wrote;
                                    benchmark keys (key:*) must all be "VXK" (redis-benchmark's 3-byte value)
  redis_client.py PORT cmd ARGS...  one command, prints the reply

Loopback only; every socket operation has a 30 s timeout. Prints
deterministic lines only (no timings, no counts that depend on the
benchmark's random keys except their consistency)."""
import hashlib
import socket
import sys


def value(i):
    h = hashlib.sha256(b"kvtier-%d" % i).hexdigest().encode()
    n = 1 + (i * 7919) % 2048
    return (h * (n // len(h) + 1))[:n]


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.f = self.s.makefile("rb")

    def send(self, *cmds):
        out = []
        for args in cmds:
            out.append(b"*%d\r\n" % len(args))
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))

    def reply(self):
        line = self.f.readline()
        if not line:
            raise EOFError("connection closed")
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError("bad reply %r" % line)

    def call(self, *args):
        self.send(args)
        return self.reply()


def write(c, n):
    batch = 1000
    for lo in range(0, n, batch):
        hi = min(lo + batch, n)
        c.send(*[("SET", "kvt:key:%d" % i, value(i)) for i in range(lo, hi)])
        for _ in range(lo, hi):
            r = c.reply()
            if r != "OK":
                print("write: SET reply %r" % r)
                return 1
    print("wrote %d keys" % n)
    return 0


def verify(c, n):
    own, bench, other = [], [], 0
    cursor = b"0"
    for _ in range(1000000):
        cursor, keys = c.call("SCAN", cursor, "COUNT", 1000)
        for k in keys:
            if k.startswith(b"kvt:key:"):
                own.append(k)
            elif k.startswith(b"key:"):
                bench.append(k)
            else:
                other += 1
        if cursor == b"0":
            break
    own_set = set(own)
    want = set(b"kvt:key:%d" % i for i in range(n))
    print("scan: own keys %d (expected %d), missing %d, unexpected %d, other keys %d"
          % (len(own_set), n, len(want - own_set), len(own_set - want), other))
    bad = 0
    keys = sorted(want)
    for lo in range(0, len(keys), 500):
        ks = keys[lo:lo + 500]
        vals = c.call("MGET", *ks)
        for k, v in zip(ks, vals):
            if v != value(int(k[8:])):
                bad += 1
    print("mget: %d own values compared, %d differ" % (len(keys), bad))
    bad_bench = 0
    for lo in range(0, len(bench), 500):
        vals = c.call("MGET", *bench[lo:lo + 500])
        bad_bench += sum(1 for v in vals if v != b"VXK")
    dbsize = c.call("DBSIZE")
    print("benchmark keys: %s, %d differ from 'VXK'; dbsize consistent: %s"
          % ("present" if bench else "none", bad_bench,
             "yes" if dbsize == len(own_set) + len(set(bench)) + other else "no (%d)" % dbsize))
    return 0 if (not bad and not bad_bench and own_set == want and bench) else 1


def main():
    port, what = int(sys.argv[1]), sys.argv[2]
    c = Conn(port)
    if what == "write":
        return write(c, int(sys.argv[3]))
    if what == "verify":
        return verify(c, int(sys.argv[3]))
    if what == "cmd":
        r = c.call(*sys.argv[3:])
        print(r.decode() if isinstance(r, bytes) else r)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
