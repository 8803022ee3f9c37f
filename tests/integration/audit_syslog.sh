#!/bin/bash
# [audit] target = syslog, with and without a syslog daemon (issue 14).
# glibc's syslog(3) drops every message without a word when there is no
# socket at /dev/log (containers, minimal hosts), so:
#   1. no socket: `krelay -t` warns (exit 0; -t -W exits 1) for [log]
#      and [audit] target = syslog, naming what is lost; krelay warns at
#      start too, and counts the audit lines it could not send as dropped
#      (an error line while it runs, the count at stop);
#   2. a syslog socket (a unix datagram socket bound by a small python
#      listener): no warning, and every audit line arrives as one
#      message, facility daemon, priority info (<30>), the JSON line
#      after the tag.
# The test runs in a mount namespace of its own (unshare -m) with a tmpfs
# on /dev holding only null, zero, full, random, urandom and tty (bind
# mounts of the real ones), so that it controls /dev/log whatever the
# host has, and leaves nothing behind: the namespace and its mounts go
# with its last process.  Skipped (77) where no mount namespace can be
# made.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
if [ -z "${KR_AUDIT_SYSLOG_NS:-}" ]; then
    ns=(unshare -m)
    [ "$(id -u)" = 0 ] || ns=(unshare -U -r -m)
    if ! command -v unshare >/dev/null 2>&1 || ! "${ns[@]}" true 2>/dev/null; then
        echo "SKIP: cannot make a mount namespace (${ns[*]})"
        [ "${KRELAY_REQUIRE_ALL:-0}" = 1 ] && exit 1
        exit 77
    fi
    KR_AUDIT_SYSLOG_NS=1 exec "${ns[@]}" bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"

kr_setup 60
W=$KR_WORK
[ -x "$KR_KRELAY" ] || kr_fail "$KR_KRELAY not built"

# A /dev of this namespace's own: a tmpfs with the few device nodes the
# test's programs open.  Each node is bound to a file first (a file bind
# mount, never a directory: nothing under $W can reach the real /dev).
private_dev() {
    local stage=$W/devstage n nodes=(null zero full random urandom tty)
    mkdir "$stage" || return 1
    for n in "${nodes[@]}"; do
        [ -e "/dev/$n" ] || continue
        : >"$stage/$n" && mount --bind "/dev/$n" "$stage/$n" || return 1
    done
    mount -t tmpfs -o mode=755,size=64k krelay-test-dev /dev || return 1
    [ "$(stat -f -c %T /dev)" = tmpfs ] || return 1
    for n in "${nodes[@]}"; do
        [ -e "$stage/$n" ] || continue
        : >"/dev/$n" && mount --bind "$stage/$n" "/dev/$n" &&
            umount "$stage/$n" || return 1
    done
    ln -s /proc/self/fd /dev/fd && ln -s /proc/self/fd/0 /dev/stdin &&
        ln -s /proc/self/fd/1 /dev/stdout &&
        ln -s /proc/self/fd/2 /dev/stderr || return 1
    rm -rf "$stage"
}
private_dev || kr_fail "cannot set up a private /dev in the mount namespace"
[ -e /dev/log ] && kr_fail "/dev/log exists in the private /dev"

base=$(kr_free_ports 2) || exit 99
# conf FILE LOGTARGET: [log] (line 9) and [audit] target = syslog (line
# 11), a rule auditing every connection
conf() {
    cat >"$1" <<EOF
[upstream]
bootstrap_servers = 127.0.0.1:1
[listener]
listen = 127.0.0.1:$base
broker_port_base = $base
node_id_min = 1
node_id_max = 1
[log]
target = $2
[audit]
target = syslog
[rule all]
audit = true
EOF
}

# ---- 1. no syslog socket ------------------------------------------------------
conf "$W/both.ini" syslog
"$KR_KRELAY" -t -c "$W/both.ini" >"$W/t1.out" 2>"$W/t1.err" ||
    kr_fail "-t failed on a warning: $(cat "$W/t1.err")"
WANT_LOG="krelay: warning: $W/both.ini:9: [log]: target = syslog, but there"
WANT_LOG="$WANT_LOG is no syslog socket at /dev/log (no syslog daemon, as in"
WANT_LOG="$WANT_LOG most containers): syslog(3) drops krelay's log lines"
WANT_LOG="$WANT_LOG without a word; use stderr (under systemd: the journal)"
WANT_LOG="$WANT_LOG or a file"
WANT_AUDIT="krelay: warning: $W/both.ini:11: [audit]: target = syslog, but"
WANT_AUDIT="$WANT_AUDIT there is no syslog socket at /dev/log (no syslog"
WANT_AUDIT="$WANT_AUDIT daemon, as in most containers): every audit line"
WANT_AUDIT="$WANT_AUDIT would be lost (krelay counts them as dropped and logs"
WANT_AUDIT="$WANT_AUDIT how many); use stdout or a file"
[ "$(cat "$W/t1.err")" = "$WANT_LOG"$'\n'"$WANT_AUDIT" ] ||
    kr_fail "-t warnings: $(cat "$W/t1.err")"
grep -q "^krelay: $W/both.ini: configuration OK (2 warnings)$" "$W/t1.out" ||
    kr_fail "-t: $(cat "$W/t1.out")"
rc=0
"$KR_KRELAY" -t -W -c "$W/both.ini" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 1 ] || kr_fail "-t -W with the syslog warnings: exit $rc, want 1"

# the daemon: the warning at start; an audited connection's two lines
# are counted as dropped, said while it runs and at stop
conf "$W/run.ini" "$W/krelay.log"
"$KR_KRELAY" -c "$W/run.ini" >"$W/krelay.out.log" 2>&1 &
pid=$!
KR_PIDS+=("$pid")
kr_wait_for 60 grep -q "notice: krelay .* started" "$W/krelay.log" ||
    kr_fail "krelay did not start: $(tail -3 "$W/krelay.out.log" "$W/krelay.log")"
grep -qF "krelay: warning: $W/run.ini:11: [audit]: target = syslog, but there is no syslog socket at /dev/log" \
    "$W/krelay.out.log" || kr_fail "no warning at start: $(cat "$W/krelay.out.log")"
exec 3<>"/dev/tcp/127.0.0.1/$base" || kr_fail "cannot connect to $base"
exec 3>&-
# lost lines are logged when the target starts failing, then at most a
# line a minute, and at close: the open and close lines in all, by stop
lost_lines() {
    local n
    n=$(sed -n 's/.*error: audit: no syslog socket at \/dev\/log (no syslog daemon): \([0-9]*\) lines\{0,1\} lost$/\1/p' \
        "$W/krelay.log" | awk '{ s += $1 } END { print s + 0 }')
    [ "$n" -ge "$1" ]
}
kr_wait_for 60 lost_lines 1 ||
    kr_fail "no 'lines lost' error: $(grep audit "$W/krelay.log")"
kr_stop "$pid" krelay "$W/krelay.out.log" "$W/krelay.log"
lost_lines 2 && ! lost_lines 3 ||
    kr_fail "not 2 lines lost for the open and close lines: $(grep audit "$W/krelay.log")"
grep -q "warn: audit: 2 lines dropped since the audit target was opened (queue full, target not writable, or no syslog socket), at stop$" \
    "$W/krelay.log" || kr_fail "stop report: $(grep audit "$W/krelay.log")"
kr_log "1. no syslog socket: -t and start warn, the lines are counted as dropped"

# ---- 2. a syslog socket ---------------------------------------------------------
# one JSON string per datagram, so that a newline inside one shows
"$KR_PY" - /dev/log "$W/syslog.jsonl" "$W/syslog.ready" <<'PYEOF' &
import json, os, signal, socket, sys
path, out, ready = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
os.chmod(path, 0o666)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
with open(out, "w") as f:
    open(ready, "w").close()
    while True:
        d = s.recv(1 << 20)
        f.write(json.dumps(d.decode("utf-8", "replace")) + "\n")
        f.flush()
PYEOF
KR_PIDS+=($!)
kr_wait_for 30 test -e "$W/syslog.ready" || kr_fail "the syslog listener did not start"
[ -S /dev/log ] || kr_fail "/dev/log is not a socket"
"$KR_KRELAY" -t -W -c "$W/both.ini" >"$W/t2.out" 2>"$W/t2.err" ||
    kr_fail "-t -W with a syslog socket: $(cat "$W/t2.err")"
[ -s "$W/t2.err" ] && kr_fail "-t warns with a syslog socket: $(cat "$W/t2.err")"
: >"$W/krelay.log"
"$KR_KRELAY" -c "$W/run.ini" >"$W/krelay.out.log" 2>&1 &
pid=$!
KR_PIDS+=("$pid")
kr_wait_for 60 grep -q "notice: krelay .* started" "$W/krelay.log" ||
    kr_fail "krelay did not start: $(tail -3 "$W/krelay.log")"
[ -s "$W/krelay.out.log" ] && kr_fail "krelay warns with a syslog socket: $(cat "$W/krelay.out.log")"
exec 3<>"/dev/tcp/127.0.0.1/$base" || kr_fail "cannot connect to $base"
exec 3>&-
two_lines() {
    [ "$(grep -c . "$W/syslog.jsonl" 2>/dev/null)" -ge 2 ]
}
kr_wait_for 60 two_lines || kr_fail "audit lines did not reach syslog: $(cat "$W/syslog.jsonl")"
kr_stop "$pid" krelay "$W/krelay.out.log" "$W/krelay.log"
grep -E "lost|dropped" "$W/krelay.log" && kr_fail "lines lost with a syslog socket"
"$KR_PY" - "$W/syslog.jsonl" "$pid" <<'PYEOF' || kr_fail "syslog messages: $(cat "$W/syslog.jsonl")"
import json, re, sys
msgs = [json.loads(l) for l in open(sys.argv[1])]
assert len(msgs) == 2, "want the open and close lines, got %r" % msgs
events = []
for m in msgs:
    # <PRI>TIMESTAMP TAG: MSG; PRI 30 = facility daemon (3) * 8 + info (6)
    g = re.fullmatch(r"<30>[A-Z][a-z]{2} [ 0-9]\d \d\d:\d\d:\d\d "
                     r"krelay(?:\[%s\])?: (\{.*\})" % sys.argv[2], m)
    assert g, "not one daemon.info message holding one line: %r" % m
    r = json.loads(g.group(1))
    assert r["type"] == "connection", r
    events.append(r["event"])
assert events == ["open", "close"], events
print("2 syslog messages, daemon.info, one audit line each")
PYEOF
kr_log "PASS: no syslog socket: warned and counted; with one: the lines arrive as daemon.info"
