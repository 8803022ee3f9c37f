#!/usr/bin/env python3
"""mkcorpus.py - (re)build the seed corpus in tests/fuzz/corpus/.

Sources: the golden frames in tests/data/codec/*.hex (size prefix
stripped, each target's control bytes put in front, see fuzz_*.c),
their JSON form from krelay-codec, conf/krelay.ini, and a few
hand-written malformed inputs below.  The output is committed; run this
only to change the corpus:

    tests/fuzz/mkcorpus.py --codec ../build/krelay-codec
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(TOP, "tests", "data", "codec")

# ApiKeys of the golden responses (file name -> key); versions start at 0
# for these APIs, so the version byte is the version itself.
RESPONSE_KEYS = {"ApiVersions": 18, "ElectLeaders": 43, "ListOffsets": 2,
                 "OffsetForLeaderEpoch": 23, "FetchSnapshot": 59,
                 "Metadata": 3}


def frames(path):
    """(comment, frame bytes) for each valid hex line of path."""
    out, comment = [], ""
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("#"):
                comment = line[1:].strip()
                continue
            if not line:
                continue
            try:
                out.append((comment, bytes.fromhex(line)))
            except ValueError:
                pass                # "bad: not hex"
    return out


def slug(s):
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")[:48]


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--codec", required=True, help="krelay-codec to use")
    args = ap.parse_args()

    reqs = frames(os.path.join(DATA, "requests.hex"))
    bad = frames(os.path.join(DATA, "bad-requests.hex"))
    for i, (c, fr) in enumerate(reqs):
        p = fr[4:]
        # request: flags, segment seed, payload
        write("request", "%02d-%s" % (i, slug(c)), bytes([0, 0]) + p)
        # frame: key, version, view size, mode, payload
        write("frame", "req-%02d-%s" % (i, slug(c)),
              bytes([0, 0, 0, 9, 0]) + p)
    # a few golden requests again in many segments
    for i in (3, 5, 9):
        write("request", "%02d-segmented" % i,
              bytes([2, 37 + i]) + reqs[i][1][4:])
    for i, (c, fr) in enumerate(bad):
        if c.startswith("bad"):
            write("request", "bad-%02d-%s" % (i, slug(c)),
                  bytes([0, 5]) + fr[4:])
    hand = {
        "bad-empty": b"",
        "bad-header-only": bytes.fromhex("0003000c00000001"),
        "bad-clientid-short": bytes.fromhex("0003000c00000001000a6b72"),
        "bad-array-count-huge": bytes.fromhex(
            "0003000c00000001ffff00ffffffff0f"),
        "bad-varint-long": bytes.fromhex(
            "0003000c00000001ffff00ffffffffffffffffff01"),
    }
    for name, p in hand.items():
        write("request", name, bytes([1, 0]) + p)
        write("frame", name, bytes([0, 0, 0, 3, 0]) + p)

    rsp_json = []
    for fn in sorted(os.listdir(DATA)):
        m = re.match(r"(\w+)-v(\d+)-response\.hex$", fn)
        if not m:
            continue
        key, ver = RESPONSE_KEYS[m.group(1)], int(m.group(2))
        for i, (c, fr) in enumerate(frames(os.path.join(DATA, fn))):
            p = fr[4:]
            name = "%s-v%d-%d" % (m.group(1), ver, i)
            write("response", name, bytes([key, ver, 0, 0]) + p)
            write("response", name + "-segmented",
                  bytes([key, ver, 2, 11 + i]) + p)
            write("frame", "rsp-" + name, bytes([key, ver, 0, 2, 1]) + p)
            out = subprocess.run(
                [args.codec, "decode", "--response", "--api-key", str(key),
                 "--api-version", str(ver)], input=fr, capture_output=True,
                check=True).stdout
            rsp_json.append((name, out.strip()))
    write("response", "bad-truncated",
          bytes([18, 3, 0, 0]) + bytes.fromhex("0000000100000300"))

    out = subprocess.run([args.codec, "decode"],
                         input=b"".join(fr for _, fr in reqs),
                         capture_output=True, check=True).stdout
    for i, line in enumerate(out.splitlines()):
        write("json", "req-%02d" % i, line)
    for name, line in rsp_json:
        write("json", "rsp-" + name, line)
    write("json", "bad-unknown-field",
          b'{"header":{"RequestApiKey":3,"RequestApiVersion":12},'
          b'"body":{"Nope":1}}')
    write("json", "bad-int-range",
          b'{"apiKey":18,"apiVersion":3,"body":{"ErrorCode":40000}}')
    write("json", "metadata-v0-defaults",
          b'{"header":{"RequestApiKey":3,"RequestApiVersion":0}}')

    with open(os.path.join(TOP, "conf", "krelay.ini"), "rb") as f:
        write("conf", "krelay-ini", f.read())
    write("conf", "minimal",
          b"[upstream]\nbootstrap_servers = 127.0.0.1:9092\n"
          b"[listener]\nlisten = 127.0.0.1:19092\nbroker_port_base = 19100\n")
    write("conf", "named-v6-dial",
          b"[upstream a]\nbootstrap_servers = [::1]:9092,k2:9093\n"
          b"dial.1 = [fd00::12]:9092\n[upstream b]\n"
          b"bootstrap_servers = b:1\n[listener x]\nlisten = :19092\n"
          b"upstream = a\nbroker_port_base = 20000\nnode_id_max = 3\n"
          b"[listener y]\nlisten = 0.0.0.0:29092\nupstream = b\n"
          b"broker_port_base = 30000\n[log]\nlevel = debug\n"
          b"target = syslog\n")
    # a value starting with ';' (the dump must write "key =;x")
    write("conf", "semicolon-value",
          b"[upstream]\nbootstrap_servers = 127.0.0.1:9092\n"
          b"[listener]\nlisten = 127.0.0.1:19092\nbroker_port_base = 19100\n"
          b"[rule r]\nclient_id =;x,#y\ndeny = true\n[process]\n"
          b"drain_timeout_ms = 0\n")
    write("conf", "bad-errors",
          b"[listener]\nlisten = nope\nbroker_port_base = 70000\n"
          b"max_frame_bytes = -1\nfoo = bar\n[bogus]\n")
    write("conf", "bad-clash",
          b"[upstream]\nbootstrap_servers = a:1\n[listener a]\n"
          b"listen = :100\nbroker_port_base = 90\n[listener b]\n"
          b"listen = :200\nbroker_port_base = 95\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
