#!/usr/bin/python3
"""rules_client.py - raw Kafka requests for the rules_*.sh tests.

Usage: rules_client.py HOST:PORT KRELAY_CODEC < requests.jsonl

Each stdin line is a request in krelay-codec's JSON form.  It is encoded
with `krelay-codec encode`, sent on one connection, its response read and
decoded with `krelay-codec decode --response`; each decoded response is
printed as one JSON line.  A response that does not arrive in 20 s, or a
connection closed by krelay, prints {"closed": true} and ends the run.
"""
import json
import socket
import subprocess
import sys

from krwire import exchange


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    codec = sys.argv[2]
    sock = socket.create_connection((host, int(port)), timeout=20)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        req = json.loads(line)
        rsp = exchange(sock, codec, line)
        if rsp is None:
            print(json.dumps({"closed": True}))
            break
        hdr = req["header"]
        out = subprocess.run(
            [codec, "decode", "--response", "--api-key",
             str(hdr["RequestApiKey"]), "--api-version",
             str(hdr["RequestApiVersion"])],
            input=rsp, capture_output=True).stdout
        sys.stdout.write(out.decode())
        sys.stdout.flush()
    sock.close()


if __name__ == "__main__":
    main()
