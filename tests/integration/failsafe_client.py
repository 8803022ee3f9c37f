#!/usr/bin/python3
"""failsafe_client.py raw HOST:PORT CODEC < steps.json > result.json
   failsafe_client.py check WORKDIR < python-code

raw: one connection; steps (a JSON list) run in order:
  {"send": [FRAME...]}       one write with every frame
  {"recv": N}                read N response frames (stops at EOF or
                             after "timeout" s, default 20)
  {"eof": S}                 read until EOF, at most S s: "eof" says
                             whether it came (frames read meanwhile are
                             kept)
  {"touch": PATH}            create PATH (done even after EOF)
  {"wait": PATH}             wait (<= "timeout" s, default 60) for PATH
FRAME: {"api": NAME, "corr": C, "cid": CLIENTID, "v": VERSION,
        "as_version": V (the header's ApiVersion is set to V after
        encoding), "topic": NAME, "topic_id": UUID, "mechanism": M,
        "session": [SessionId, SessionEpoch] and "no_topics": true (Fetch),
        "truncate": N (the last N bytes of the frame cut off)}
   or  {"raw_key": K, "v": V, "corr": C, "cid": CLIENTID} (header v1 and
        a few body bytes: an ApiKey krelay-codec does not know).
Prints {"sent": [...], "responses": [{"corr", "bytes", "hex", "decoded",
"decode_error"}], "eof": bool|null, "error": str|null}.

check: runs the code on stdin with the helpers below; an AssertionError
prints its message and exits 1.
"""
import json
import os
import socket
import struct
import subprocess
import sys
import time

APIS = {
    "Produce": (0, 12, {"TransactionalId": None, "Acks": -1,
                        "TimeoutMs": 5000,
                        "TopicData": [{"Name": "open", "PartitionData": [
                            {"Index": 0, "Records": None}]}]}),
    "Fetch": (1, 13, {"MaxWaitMs": 0, "MinBytes": 0, "MaxBytes": 1048576,
                      "Topics": [{"TopicId": None, "Partitions": [
                          {"Partition": 0, "FetchOffset": 0,
                           "PartitionMaxBytes": 1048576}]}]}),
    "Metadata": (3, 12, {"Topics": None, "AllowAutoTopicCreation": False,
                         "IncludeTopicAuthorizedOperations": False}),
    "SaslHandshake": (17, 0, {"Mechanism": "GSSAPI"}),
    "ApiVersions": (18, 3, {"ClientSoftwareName": "failsafe-test",
                            "ClientSoftwareVersion": "1.0"}),
    "DeleteTopics": (20, 6, {"Topics": [{"Name": "open"}],
                             "TimeoutMs": 5000}),
    "FindCoordinator": (10, 2, {"Key": "group-1", "KeyType": 0}),
    "ListGroups": (16, 4, {"StatesFilter": []}),
}


def build(codec, f):
    """(frame bytes, ApiKey, ApiVersion as sent, CorrelationId)."""
    corr, cid = f["corr"], f.get("cid", "failsafe")
    if "raw_key" in f:
        key, ver = f["raw_key"], f.get("v", 0)
        c = cid.encode()
        p = struct.pack(">hhih", key, ver, corr, len(c)) + c + \
            b"\x00\x01unknown-api-body"
        return struct.pack(">i", len(p)) + p, key, ver, corr
    key, ver, body = APIS[f["api"]]
    ver = f.get("v", ver)
    body = json.loads(json.dumps(body))
    if "topic" in f:
        if key == 0:
            body["TopicData"][0]["Name"] = f["topic"]
        elif key == 3:
            body["Topics"] = [{"Name": f["topic"]}]
        elif key == 20:
            body["Topics"] = [{"Name": f["topic"]}]
    if key == 1:
        if "topic_id" in f:
            body["Topics"][0]["TopicId"] = f["topic_id"]
        if "topic" in f:                    # Fetch v12 and older
            del body["Topics"][0]["TopicId"]
            body["Topics"][0]["Topic"] = f["topic"]
        if "session" in f:                  # [SessionId, SessionEpoch]
            body["SessionId"], body["SessionEpoch"] = f["session"]
        if f.get("no_topics"):              # an incremental Fetch
            body["Topics"] = []
    if "mechanism" in f:
        body["Mechanism"] = f["mechanism"]
    if key == 3 and ver == 0 and body["Topics"] is None:
        body["Topics"] = []               # v0: empty means every topic
    req = {"header": {"RequestApiKey": key, "RequestApiVersion": ver,
                      "CorrelationId": corr, "ClientId": cid},
           "body": body}
    for _ in range(10):
        p = subprocess.run([codec, "encode"], input=json.dumps(req).encode(),
                           capture_output=True)
        if p.returncode == 0:
            break
        # the templates are for the newest versions: drop the fields an
        # older version does not have ("ClientSoftwareName", "A[0].B")
        try:
            err = json.loads(p.stderr.decode())
        except ValueError:
            err = {}
        if not err.get("error", "").startswith("field not in version"):
            break
        node, path = body, err["field"].replace("]", "").split(".")
        for part in path[:-1]:
            name, _, idx = part.partition("[")
            node = node[name][int(idx)] if idx else node[name]
        del node[path[-1]]
    if p.returncode != 0:
        raise SystemExit("failsafe_client.py: cannot encode %r: %s" % (req, p.stderr))
    frame = p.stdout
    if "as_version" in f:
        ver = f["as_version"]
        frame = frame[:6] + struct.pack(">h", ver) + frame[8:]
    if "truncate" in f:             # a body that does not decode
        frame = frame[:-f["truncate"]]
        frame = struct.pack(">i", len(frame) - 4) + frame[4:]
    return frame, key, ver, corr


def recv_frame(sock, deadline):
    """(frame, None) or (None, "eof"|"timeout")."""
    buf = b""
    need = 4
    while len(buf) < need:
        left = deadline - time.monotonic()
        if left <= 0:
            return None, "timeout"
        sock.settimeout(left)
        try:
            chunk = sock.recv(need - len(buf))
        except socket.timeout:
            return None, "timeout"
        except ConnectionResetError:
            return None, "eof"
        if not chunk:
            return None, "eof"
        buf += chunk
        if need == 4 and len(buf) == 4:
            need = 4 + struct.unpack(">i", buf)[0]
    return buf, None


def decode(codec, key, ver, frame):
    p = subprocess.run([codec, "decode", "--response", "--api-key",
                        str(key), "--api-version", str(ver)],
                       input=frame, capture_output=True)
    try:
        out = json.loads(p.stdout.decode())
    except ValueError:
        return None, "krelay-codec: %r" % p.stderr[:200]
    if "error" in out:
        return None, out["error"]
    return out, None


def raw(hostport, codec):
    steps = json.load(sys.stdin)
    host, port = hostport.rsplit(":", 1)
    res = {"sent": [], "responses": [], "eof": None, "error": None}
    sent = {}
    sock = socket.create_connection((host, int(port)), timeout=20)
    closed = False

    def take(frame):
        corr = struct.unpack(">i", frame[4:8])[0]
        r = {"corr": corr, "bytes": len(frame), "hex": frame.hex(),
             "decoded": None, "decode_error": None}
        if corr in sent:
            key, ver = sent[corr]
            r["decoded"], r["decode_error"] = decode(codec, key, ver, frame)
        else:
            r["decode_error"] = "no request with this CorrelationId"
        res["responses"].append(r)

    for st in steps:
        if "touch" in st:
            open(st["touch"], "w").close()
            continue
        if "wait" in st:
            end = time.monotonic() + st.get("timeout", 60)
            while not os.path.exists(st["wait"]):
                if time.monotonic() > end:
                    res["error"] = "timed out waiting for " + st["wait"]
                    closed = True
                    break
                time.sleep(0.05)
            continue
        if closed:
            continue
        if "send" in st:
            data = b""
            for f in st["send"]:
                frame, key, ver, corr = build(codec, f)
                sent[corr] = (key, ver)
                res["sent"].append({"corr": corr, "api_key": key,
                                    "api_version": ver,
                                    "bytes": len(frame)})
                data += frame
            try:
                sock.sendall(data)
            except OSError as e:
                res["error"] = "send: %s" % e
                res["eof"] = True
                closed = True
        elif "recv" in st:
            end = time.monotonic() + st.get("timeout", 20)
            for _ in range(st["recv"]):
                frame, why = recv_frame(sock, end)
                if frame is None:
                    if why == "eof":
                        res["eof"] = True
                        closed = True
                    else:
                        res["error"] = "timed out waiting for a response"
                    break
                take(frame)
        elif "eof" in st:
            end = time.monotonic() + st["eof"]
            while True:
                frame, why = recv_frame(sock, end)
                if frame is None:
                    res["eof"] = why == "eof"
                    closed = closed or why == "eof"
                    break
                take(frame)
    sock.close()
    json.dump(res, sys.stdout)
    print()


# ---- check helpers --------------------------------------------------------

W = None


def R(name):
    """The result of raw client run NAME."""
    with open(os.path.join(W, name + ".json")) as f:
        return json.load(f)


def rsp(res, corr):
    """The responses of res with CorrelationId corr."""
    return [r for r in res["responses"] if r["corr"] == corr]


def corrs(res):
    return [r["corr"] for r in res["responses"]]


def broker(corr=None, event="request"):
    """Fake broker events (requests from clients: not krelay's own)."""
    out = []
    with open(os.path.join(W, "broker.jsonl")) as f:
        for line in f:
            e = json.loads(line)
            if e["event"] != event:
                continue
            if event == "request" and e["client_id"] == "krelay":
                continue
            if corr is not None and e.get("correlation_id") != corr:
                continue
            out.append(e)
    return out


def got(corr):
    """Did the broker receive the request with CorrelationId corr?"""
    return len(broker(corr)) > 0


def audit(section, corr):
    """Audit request lines of section with CorrelationId corr."""
    p = os.path.join(W, "audit-%s.log" % section)
    if not os.path.exists(p):
        return []
    out = []
    with open(p) as f:
        for line in f:
            e = json.loads(line)          # every line must be JSON
            if e.get("type") == "request" and e.get("correlation_id") == corr:
                out.append(e)
    return out


def klog(section):
    with open(os.path.join(W, "krelay-%s.log" % section)) as f:
        return f.read().splitlines()


def klines(section, *words):
    return [l for l in klog(section) if all(w in l for w in words)]


def refused_audit(section, corr, api, key, ver, cid, nbytes):
    """The audit line of a refused request (spec: Requests 1)."""
    a = audit(section, corr)
    assert len(a) == 1, "%d audit lines for CorrelationId %d, want 1: %r" % (
        len(a), corr, a)
    a = a[0]
    want = {"type": "request", "api": api, "api_key": key,
            "api_version": ver, "correlation_id": corr, "client_id": cid,
            "request_bytes": nbytes, "actions": ["refused"]}
    bad = {k: a.get(k) for k in want if a.get(k) != want[k]}
    assert not bad, "audit line for CorrelationId %d: %r differ from %r " \
        "(line %r)" % (corr, bad, {k: want[k] for k in bad}, a)
    de = a.get("decode_error")
    assert isinstance(de, str) and de, \
        "audit line for CorrelationId %d: no decode_error: %r" % (corr, a)
    return a


def refused_log(section, corr, rule):
    """The notice line of a refused request (spec: Requests 1)."""
    ls = klines(section, "CorrelationId %d" % corr, "refused",
                "[rule %s]" % rule)
    assert ls, "no krelay log line with 'CorrelationId %d', 'refused' and " \
        "'[rule %s]'; lines naming it: %r" % (
            corr, rule, klines(section, "CorrelationId %d" % corr)[:4])
    assert any("notice" in l for l in ls), \
        "the refusal line is not at level notice: %r" % ls
    return ls


def sent_bytes(res, corr):
    return [s["bytes"] for s in res["sent"] if s["corr"] == corr][0]


def check(workdir):
    global W
    W = workdir
    code = sys.stdin.read()
    env = dict(globals())
    env["E"] = os.environ
    try:
        exec(compile(code, "<check>", "exec"), env)
    except AssertionError as e:
        print(str(e)[:1500])
        return 1
    except Exception as e:      # e.g. no response where one was expected
        tb = e.__traceback__
        while tb.tb_next is not None and \
                tb.tb_frame.f_code.co_filename != "<check>":
            tb = tb.tb_next
        print("%s at line %d of the check: %s"
              % (type(e).__name__, tb.tb_lineno, str(e)[:1000]))
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "raw":
        raw(sys.argv[2], sys.argv[3])
    else:
        sys.exit(check(sys.argv[2]))
