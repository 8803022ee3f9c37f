#!/bin/bash
# codec_tool.sh - krelay-codec decode/encode/list on the golden frames in
# tests/data/codec (built by mkframes.py, independently of the codec).
#
# Needs only the built krelay-codec and python3 (for JSON checks and
# hex <-> binary).  Exit codes: 0 pass, 1 fail, 77 skip, 99 hard error.

set -u
set -o pipefail

: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${top_builddir:=$(pwd)}"
: "${KRELAY_REQUIRE_ALL:=0}"

KC=${KRELAY_CODEC_BIN:-$top_builddir/krelay-codec}
DATA=$top_srcdir/tests/data/codec
PY=$(command -v python3 || true)

if [ ! -x "$KC" ]; then
    echo "codec_tool: $KC not built" >&2
    exit 99
fi
if [ -z "$PY" ]; then
    echo "codec_tool: python3 not found" >&2
    [ "$KRELAY_REQUIRE_ALL" = 1 ] && exit 1
    exit 77
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/krelay-codec-test.XXXXXX") || exit 99
trap 'rm -rf "$WORK"' EXIT

FAILS=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }

# frames only: drop comments and blank lines
frames() { grep -v -e '^#' -e '^[[:space:]]*$' "$1"; }
# hex lines -> binary frames back to back
hex2bin() { "$PY" -c 'import sys
for l in sys.stdin:
    l = "".join(l.split())
    if l and not l.startswith("#"):
        sys.stdout.buffer.write(bytes.fromhex(l))'; }

# Run python checks on a file of JSON lines: $1 file, $2 description,
# $3 python code with L = the list of parsed lines.
check_json() {
    if "$PY" - "$1" <<EOF
import json, sys
L = [json.loads(x) for x in open(sys.argv[1])]
$3
EOF
    then pass "$2"; else fail "$2"; fi
}

# ---- decode requests --------------------------------------------------------

frames "$DATA/requests.hex" >"$WORK/requests.hex"
"$KC" decode --hex <"$DATA/requests.hex" >"$WORK/requests.json"
rc=$?
[ $rc -eq 0 ] && pass "decode --hex requests: exit 0" \
              || fail "decode --hex requests: exit $rc"
if [ "$(wc -l <"$WORK/requests.json")" -eq "$(wc -l <"$WORK/requests.hex")" ]
then pass "one JSON line per frame"; else fail "one JSON line per frame"; fi

check_json "$WORK/requests.json" "decoded request values" '
el, lo, oe, md, ext, p9, p3, aq, av, tg = L
assert el == {"header": {"RequestApiKey": 43, "RequestApiVersion": 2,
                         "CorrelationId": 0, "ClientId": ""},
              "body": {"ElectionType": 0, "TopicPartitions":
                       [{"Topic": "", "Partitions": [0]}], "TimeoutMs": 0}}, el
assert lo["body"]["Topics"][0]["Partitions"][0] == {
    "PartitionIndex": 0, "CurrentLeaderEpoch": 0, "Timestamp": 0}, lo
assert oe["body"]["ReplicaId"] == 0 and oe["header"]["RequestApiKey"] == 23
assert md["header"]["ClientId"] == "krelay-test"
assert md["header"]["CorrelationId"] == 7
assert md["body"]["Topics"] == [
    {"TopicId": "AAECAwQFBgcICQoLDA0ODw", "Name": "orders"},
    {"TopicId": "AAAAAAAAAAAAAAAAAAAAAA", "Name": None}], md
assert md["body"]["AllowAutoTopicCreation"] is True
assert "IncludeClusterAuthorizedOperations" not in md["body"]
parts = ext["body"]["Topics"][0]["Partitions"]
assert parts[0]["Timestamp"] == -9223372036854775808
assert parts[1]["Timestamp"] == 9223372036854775807
assert ext["header"]["ClientId"] is None
assert ext["header"]["CorrelationId"] == 2147483647
import base64
pd9 = p9["body"]["TopicData"][0]["PartitionData"]
rec = base64.b64decode(pd9[0]["Records"], validate=True)
assert len(rec) == 61 and rec[8:12] == bytes([0, 0, 0, 49]), rec
assert p9["body"]["TransactionalId"] is None and p9["body"]["Acks"] == -1
pd = p3["body"]["TopicData"][0]["PartitionData"]
assert base64.b64decode(pd[0]["Records"]) == rec and pd[1]["Records"] is None
vals = [op["Value"] for op in aq["body"]["Entries"][0]["Ops"]]
assert vals[0] == 1.5 and vals[1:4] == ["NaN", "Infinity", "-Infinity"], vals
assert vals[4] == 0.0 and str(vals[4]) == "-0.0", vals
assert av["body"] == {"ClientSoftwareName": "librdkafka",
                      "ClientSoftwareVersion": "2.12.0"}, av
assert tg["header"]["_unknownTaggedFields"] == [{"tag": 5, "data": "YWJj"}]
assert tg["body"]["_unknownTaggedFields"] == [{"tag": 9, "data": "AP8="}]
'

# upper case and spaces in the hex give the same JSON
tr 'a-f' 'A-F' <"$WORK/requests.hex" | sed 's/\(..\)/\1 /g' \
    | "$KC" decode --hex >"$WORK/requests-upper.json"
if cmp -s "$WORK/requests.json" "$WORK/requests-upper.json"; then
    pass "hex: either case, whitespace ignored"
else
    fail "hex: either case, whitespace ignored"
fi

# binary input gives the same JSON
hex2bin <"$WORK/requests.hex" >"$WORK/requests.bin"
"$KC" decode <"$WORK/requests.bin" >"$WORK/requests-bin.json"
rc=$?
if [ $rc -eq 0 ] && cmp -s "$WORK/requests.json" "$WORK/requests-bin.json"
then pass "binary decode = hex decode"; else fail "binary decode (exit $rc)"; fi

# ---- decode | encode gives the same bytes -----------------------------------

"$KC" encode --hex <"$WORK/requests.json" >"$WORK/requests-re.hex"
rc=$?
if [ $rc -eq 0 ] && cmp -s "$WORK/requests.hex" "$WORK/requests-re.hex"; then
    pass "requests: decode | encode --hex gives the same hex"
else
    fail "requests: decode | encode --hex (exit $rc)"
    diff "$WORK/requests.hex" "$WORK/requests-re.hex" | head -20
fi
"$KC" encode <"$WORK/requests.json" >"$WORK/requests-re.bin"
rc=$?
if [ $rc -eq 0 ] && cmp -s "$WORK/requests.bin" "$WORK/requests-re.bin"; then
    pass "requests: decode | encode gives the same binary"
else
    fail "requests: binary decode | encode (exit $rc)"
fi

for spec in ElectLeaders:2 ListOffsets:10 OffsetForLeaderEpoch:4 \
            ApiVersions:3 FetchSnapshot:0 Metadata:12; do
    api=${spec%%:*}
    ver=${spec##*:}
    f=$DATA/$api-v$ver-response.hex
    frames "$f" >"$WORK/rsp.hex"
    "$KC" decode --hex --response --api-key "$api" --api-version "$ver" \
        <"$f" >"$WORK/$api.json"
    rc1=$?
    "$KC" encode --hex <"$WORK/$api.json" >"$WORK/rsp-re.hex"
    rc2=$?
    if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && cmp -s "$WORK/rsp.hex" \
        "$WORK/rsp-re.hex"; then
        pass "$api v$ver response: decode | encode gives the same hex"
    else
        fail "$api v$ver response: round trip (exit $rc1/$rc2)"
    fi
done

check_json "$WORK/ElectLeaders.json" "ElectLeaders v2 response values" '
(r,) = L
assert r == {"apiKey": 43, "apiVersion": 2, "header": {"CorrelationId": 0},
             "body": {"ThrottleTimeMs": 0, "ErrorCode": 0,
                      "ReplicaElectionResults": [{"Topic": "",
                        "PartitionResult": [{"PartitionId": 0, "ErrorCode": 0,
                                             "ErrorMessage": ""}]}]}}, r
'
check_json "$WORK/ApiVersions.json" "ApiVersions v3 response values" '
plain, tagged = L
assert plain["header"] == {"CorrelationId": 1}
assert set(plain["body"]) == {"ErrorCode", "ApiKeys", "ThrottleTimeMs"}, plain
b = tagged["body"]
assert b["ApiKeys"][1] == {"ApiKey": 3, "MinVersion": 0, "MaxVersion": 13}
assert b["ThrottleTimeMs"] == 100
assert b["SupportedFeatures"] == [
    {"Name": "metadata.version", "MinVersion": 1, "MaxVersion": 27}]
assert b["FinalizedFeaturesEpoch"] == 5 and b["ZkMigrationReady"] is True
assert "FinalizedFeatures" not in b
assert b["_unknownTaggedFields"] == [{"tag": 7, "data": "AQID"}]
'
check_json "$WORK/FetchSnapshot.json" "FetchSnapshot v0 response values" '
(r,) = L
assert r["header"] == {"CorrelationId": 42}
p = r["body"]["Topics"][0]["Partitions"][0]
assert r["body"]["Topics"][0]["Name"] == "orders"
assert p["Index"] == 3 and p["SnapshotId"] == {"EndOffset": 150382, "Epoch": 17}
assert p["CurrentLeader"] == {"LeaderId": 1, "LeaderEpoch": 17}
assert p["Size"] == 1048576 and p["UnalignedRecords"] == "3q2+7wA=", p
assert "NodeEndpoints" not in r["body"]
'

# ---- errors ------------------------------------------------------------------

"$KC" decode --hex <"$DATA/bad-requests.hex" >"$WORK/bad.json"
rc=$?
[ $rc -eq 1 ] && pass "malformed frames: exit 1" \
              || fail "malformed frames: exit $rc, want 1"
check_json "$WORK/bad.json" "malformed frames: errors, decoding goes on" '
assert len(L) == 6, L
good1, trunc, size, nothex, unknown, good2 = L
assert good1["header"]["RequestApiKey"] == 43
assert set(trunc) == {"error", "field", "offset"}, trunc
assert trunc["field"] == "Topics[0].Name" and trunc["offset"] == 43, trunc
assert size == {"error": size["error"], "field": "size", "offset": 0}, size
assert "hex" in nothex["error"] and nothex["offset"] == 5, nothex
assert "error" in unknown and isinstance(unknown["offset"], int), unknown
assert good2["header"]["RequestApiKey"] == 2 and "body" in good2
'

# binary: a truncated last frame stops decoding after the good ones
{ frames "$DATA/requests.hex" | head -2 | hex2bin
  printf '\000\000\001\000\000\003'; } >"$WORK/trunc.bin"
"$KC" decode <"$WORK/trunc.bin" >"$WORK/trunc.json"
rc=$?
[ $rc -eq 1 ] && pass "binary truncated frame: exit 1" \
              || fail "binary truncated frame: exit $rc"
check_json "$WORK/trunc.json" "binary truncated frame: error after 2 frames" '
assert len(L) == 3, L
assert L[0]["header"]["RequestApiKey"] == 43
assert L[1]["header"]["RequestApiKey"] == 2
assert L[2]["field"] == "size" and "truncated" in L[2]["error"], L[2]
'

# encode: a bad line is reported on stderr with its number; others go on
printf '%s\n' '{"header":{"RequestApiKey":43,"RequestApiVersion":2}}' \
    '{"header":{"RequestApiKey":43,"RequestApiVersion":2},"body":{"Nope":1}}' \
    'not json' \
    '{"apiKey":43,"apiVersion":2,"header":{"CorrelationId":5}}' \
    >"$WORK/enc.jsonl"
"$KC" encode --hex <"$WORK/enc.jsonl" >"$WORK/enc.hex" 2>"$WORK/enc.err"
rc=$?
[ $rc -eq 1 ] && pass "encode bad lines: exit 1" \
              || fail "encode bad lines: exit $rc"
check_json "$WORK/enc.err" "encode bad lines: errors name line and field" '
assert len(L) == 2, L
assert L[0]["line"] == 2 and L[0]["field"] == "Nope", L[0]
assert L[1]["line"] == 3 and "JSON" in L[1]["error"], L[1]
'
# ElectLeaders v2 defaults: ElectionType 0, TopicPartitions [], TimeoutMs
# 60000; response: ThrottleTimeMs 0, ErrorCode 0, ReplicaElectionResults []
want="00000012002b00020000000000000000010000ea6000
0000000d00000005000000000000000100"
if [ "$(cat "$WORK/enc.hex")" = "$want" ]; then
    pass "encode defaults"
else
    fail "encode defaults: got $(cat "$WORK/enc.hex")"
fi

# ---- the README's examples ---------------------------------------------------
# Each "$ command" of the README's krelay-codec block runs from the top of
# the sources with this build's krelay-codec; the lines under it are its
# output ("..." ending a line: the rest of it; none shown: some output).
# A command starting with "..." goes on from the one before it, cut at its
# first "|".
if PATH="$(dirname "$KC"):$PATH" "$PY" - "$top_srcdir" <<'EOF'
import re, subprocess, sys
top = sys.argv[1]
text = open(top + '/README.md').read()
block = re.search(r'^## krelay-codec\n+```sh\n(.*?)^```', text, re.S | re.M)
assert block, 'README: no ```sh block under "## krelay-codec"'
cmds, cur = [], None
lines = block.group(1).split('\n')
i = 0
while i < len(lines):
    line = lines[i]
    i += 1
    if line.startswith('$ '):
        c = line[2:]
        while c.rstrip().endswith('\\') and i < len(lines):
            c = c.rstrip()[:-1] + ' ' + lines[i].strip()
            i += 1
        cur = [c, []]
        cmds.append(cur)
    elif line.strip() and cur is not None:
        cur[1].append(line)
assert len(cmds) >= 3, cmds
bad = 0
prev = None
for c, want in cmds:
    if c.startswith('...'):
        c = prev.split('|')[0].rstrip() + c[3:]
    prev = c
    r = subprocess.run(['bash', '-o', 'pipefail', '-c', c], cwd=top,
                       capture_output=True, text=True)
    got = r.stdout.split('\n')[:-1]
    ok = r.returncode == 0 and len(got) > 0
    if want:
        ok = ok and len(got) == len(want) and all(
            g.startswith(w[:-3]) if w.endswith('...') else g == w
            for g, w in zip(got, want))
    print('%s: README: %s' % ('PASS' if ok else 'FAIL', c))
    if not ok:
        bad += 1
        print('  exit %d, stderr %r\n  got  %r\n  want %r'
              % (r.returncode, r.stderr[:300], got[:3], want))
sys.exit(1 if bad else 0)
EOF
then pass "README krelay-codec examples"; else fail "README krelay-codec examples"; fi

# ---- list, usage -------------------------------------------------------------

"$KC" list >"$WORK/list.txt"
rc=$?
[ $rc -eq 0 ] && pass "list: exit 0" || fail "list: exit $rc"
row() { awk -v k="$1" '$1 == k { print $2, $3, $4, $5 }' "$WORK/list.txt"; }
for want in "0|Produce 0-13 9-13 0-2" "1|Fetch 0-18 12-18 0-3" \
            "3|Metadata 0-13 9-13 -" "4|LeaderAndIsr 0-7 4-7 0-7" \
            "17|SaslHandshake 0-1 - -" "76|ShareGroupHeartbeat 0-1 0-1 0"; do
    got=$(row "${want%%|*}")
    if [ "$got" = "${want#*|}" ]; then pass "list: $got"
    else fail "list ApiKey ${want%%|*}: got '$got', want '${want#*|}'"; fi
done

usage_rc() {
    "$KC" "$@" </dev/null >/dev/null 2>&1
    echo $?
}
for args in "" "frobnicate" "decode --bogus" "decode --api-key 3" \
            "decode --response --api-key 3" \
            "decode --response --api-key Nope --api-version 0" \
            "decode --response --api-key 3 --api-version 99" \
            "encode extra" "list extra"; do
    # shellcheck disable=SC2086
    rc=$(usage_rc $args)
    [ "$rc" = 2 ] && pass "usage error '$args': exit 2" \
                  || fail "usage error '$args': exit $rc, want 2"
done
"$KC" --help | grep -q 'krelay-codec decode' && pass "--help" \
                                              || fail "--help"
"$KC" --version | grep -q '^krelay-codec (krelay) [0-9]' && pass "--version" \
                                                         || fail "--version"
"$KC" >/dev/null 2>"$WORK/usage.err"
grep -q 'Usage:' "$WORK/usage.err" && pass "usage message on stderr" \
                                   || fail "usage message on stderr"

echo "codec_tool: $FAILS failure(s)"
[ $FAILS -eq 0 ]
