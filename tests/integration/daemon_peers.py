#!/usr/bin/python3
"""daemon_peers.py - scripted peers for tests/integration/daemon.sh.

slow-broker PORTFILE DELAY
    A one-socket Kafka upstream on 127.0.0.1 (port written to PORTFILE)
    that answers every request frame, in order, DELAY seconds after it
    arrived, with an ApiVersions v0 response (ErrorCode 0, no ApiKeys):
    requests stay in flight that long.
pipeline HOST:PORT N SENTFILE
    Send N ApiVersions v0 requests (CorrelationIds 1..N) at once, write
    SENTFILE, then read responses until N came or the connection closes;
    print
    "answered K ids I,J,..." (K responses, their CorrelationIds).
probe HOST:PORT
probe-send HOST:PORT
    Connect (probe-send: and send an ApiVersions request at once); print "eof" when the connection is closed without a byte
    (krelay draining), "reset" when it is reset, "refused" when nothing
    listens, "open" when it stays open for 2 s.
notify SOCKPATH OUTFILE
    An AF_UNIX datagram server (the NOTIFY_SOCKET of sd_notify): each
    datagram is appended to OUTFILE as one line.
Python 3 standard library only.
"""
import socket
import struct
import sys
import threading
import time


def recv_exact(sock, n):
    buf = b''
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def slow_broker(portfile, delay):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(('127.0.0.1', 0))
    srv.listen(16)
    with open(portfile + '.tmp', 'w') as f:
        f.write('%d\n' % srv.getsockname()[1])
    import os
    os.rename(portfile + '.tmp', portfile)

    def serve(c):
        while True:
            hdr = recv_exact(c, 4)
            if hdr is None:
                return
            (size,) = struct.unpack('>i', hdr)
            body = recv_exact(c, size)
            if body is None:
                return
            arrived = time.monotonic()
            corr = body[4:8]
            wait = arrived + delay - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            rsp = corr + struct.pack('>hi', 0, 0)
            try:
                c.sendall(struct.pack('>i', len(rsp)) + rsp)
            except OSError:
                return

    while True:
        c, _ = srv.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def hostport(s):
    h, p = s.rsplit(':', 1)
    return h, int(p)


def pipeline(addr, n, sentfile):
    s = socket.create_connection(hostport(addr), timeout=60)
    out = b''
    for i in range(1, n + 1):
        body = struct.pack('>hhi', 18, 0, i) + struct.pack('>h', 5) + b'drain'
        out += struct.pack('>i', len(body)) + body
    s.sendall(out)
    open(sentfile, 'w').close()
    ids = []
    while len(ids) < n:
        hdr = recv_exact(s, 4)
        if hdr is None:
            break
        (size,) = struct.unpack('>i', hdr)
        body = recv_exact(s, size)
        if body is None:
            break
        ids.append(struct.unpack('>i', body[:4])[0])
    print('answered %d ids %s' % (len(ids), ','.join(map(str, ids))))


def probe(addr, send=False):
    try:
        s = socket.create_connection(hostport(addr), timeout=5)
    except ConnectionRefusedError:
        print('refused')
        return
    s.settimeout(2)
    try:
        if send:
            # what a Kafka client sends at once: ApiVersions v0, before it
            # can have seen krelay's FIN; a peer that closed its socket
            # answers it with RST
            body = struct.pack('>hhih', 18, 0, 7, 5) + b'probe'
            s.sendall(struct.pack('>i', len(body)) + body)
            time.sleep(0.3)
            # a RST after the FIN leaves recv() saying EOF all the same
            # (the FIN came first): the socket's error says it
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                print('reset')
                return
        data = s.recv(1)
        print('eof' if data == b'' else 'data')
    except socket.timeout:
        print('open')
    except (ConnectionResetError, BrokenPipeError):
        print('reset')


def notify(path, outfile):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind('\0' + path[1:] if path.startswith('@') else path)
    while True:
        data = s.recv(4096)
        with open(outfile, 'a') as f:
            f.write(data.decode('utf-8', 'replace').replace('\n', ' ') +
                    '\n')


def main():
    cmd = sys.argv[1]
    if cmd == 'slow-broker':
        slow_broker(sys.argv[2], float(sys.argv[3]))
    elif cmd == 'pipeline':
        pipeline(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif cmd == 'probe':
        probe(sys.argv[2])
    elif cmd == 'probe-send':
        probe(sys.argv[2], send=True)
    elif cmd == 'notify':
        notify(sys.argv[2], sys.argv[3])
    else:
        sys.exit('unknown command %s' % cmd)


if __name__ == '__main__':
    main()
