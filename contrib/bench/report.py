#!/usr/bin/python3
"""report.py - medians, ratios and the results JSON of a krelay benchmark.

    report.py --runs RUNS.jsonl --out RESULTS.json [--meta KEY=VALUE]...
    report.py --table RESULTS.json        (print the table of a saved run)
    report.py --rebuild RESULTS.json      (recompute summaries and notes
                                           from the saved raw runs)

RUNS.jsonl holds one JSON object per client run, written by run.sh
(workload, target, rep, rc, CPU seconds the mock and proxies used, and
the client's own JSON under "client").  The output format is described in
contrib/bench/results/README.md.  The table goes to stdout as Markdown.
Only the standard library is used.

Audit (issue 14): the target krelay_audit is a second krelay of the same
binary whose one rule audits every request to a file; the results gain an
"audit" section comparing it with krelay in the same run (MB/s, CPU
seconds per GiB, CPU microseconds per request, against the issue's
targets: AUDIT_LIMITS).

SASL (issue 9): the target krelay_sasl is another krelay of the same
binary whose listener terminates SASL (sasl = terminate, SCRAM-SHA-512),
its clients logging in with SCRAM-SHA-512; the results gain a "sasl"
section comparing it with krelay in the same run the same way, against
the issue's limit: krelay CPU seconds per GiB at most 1.03x krelay's
(SASL_LIMITS).

TLS termination (issue 8): the targets krelay_tls and haproxy_tls (one
thread) terminate TLS 1.3 (TLS_AES_128_GCM_SHA256, X25519, ECDSA P-256)
in front of the same plaintext mock and run the tls_* workloads only; the
results gain a "tls" section: per case the medians of both, krelay_tls /
haproxy_tls and a verdict against the issue's targets (TLS_LIMITS).

Blast (proxy-bound): blast_produce and tls_blast_produce put the proxy
alone on its CPU between krbench blast (prebuilt Produce requests over
many connections) and krbench canned (a scripted upstream), both on the
client's CPU: the proxy is the bottleneck, so its throughput is measured
rather than the client's.  Each target's summary also gives the CPU per
request of the load generator, the scripted upstream and the proxy, and
the peers' (generator + upstream) over the proxy's (issue 12 asks for at
most 0.2x).  tls_blast_produce's MB/s and CPU per GiB join the "tls"
cases with tls_produce's limits.

A/B mode (run.sh --ab, meta "ab" = "1"): the targets are two krelay
binaries, krelay_a (the baseline) and krelay_b (the candidate), and the
results gain an "ab" section: per case the medians of A and B, B/A and a
verdict against AB_LIMITS; the table is then the A/B table.
"""

import argparse
import json
import statistics
import sys

TARGETS = ("direct", "haproxy", "krelay", "krelay_a", "krelay_b",
           "krelay_audit", "krelay_sasl", "krelay_tls", "haproxy_tls")
# The targets of an ordinary run, and of an A/B run (run.sh --ab).
PLAIN = ("direct", "haproxy", "krelay", "krelay_audit", "krelay_sasl")
AB = ("krelay_a", "krelay_b")
PROXIES = ("haproxy", "krelay", "krelay_a", "krelay_b", "krelay_audit",
           "krelay_sasl", "krelay_tls", "haproxy_tls")
# The TLS-terminating targets (issue 8), in the order of their ratio.
TLS = ("krelay_tls", "haproxy_tls")
# A/B: the largest B/A - 1 each metric may show (the thresholds:
# CPU seconds per GiB within 3 %, latency p99 within 5 %), and the least
# number of repetitions of each A and B for a verdict.
AB_LIMITS = {"cpu_s_per_gib": 0.03, "p99_us": 0.05}
AB_MIN_RUNS = 5
THROUGHPUT = (
    ("produce_1k", "produce 1 KiB records"),
    ("produce_100", "produce 100 B records"),
    ("produce_1rec", "produce 100 B, one record per request"),
    ("fetch", "fetch 1 KiB records"),
)
# Issue 14's targets for the audit leg against krelay in the same run:
# krelay CPU seconds per GiB at most 10 % more with normal batching (the
# workloads other than produce_1rec), and at most 2 µs more krelay CPU
# per audited request (produce_1rec: one record per request).
AUDIT_LIMITS = {"cpu_s_per_gib_ratio": 1.10, "added_us_per_request": 2.0}
# Issue 9's limit for the SASL leg against krelay in the same run: "SASL
# costs nothing after authentication ... CPU per GiB within 3 % of the
# same run without SASL, medians of interleaved runs", in every
# throughput workload; a verdict needs SASL_MIN_RUNS repetitions of each.
SASL_LIMITS = {"cpu_s_per_gib_ratio": 1.03}
SASL_MIN_RUNS = 5
# TLS termination (issue 8): the workloads, and the limits of krelay_tls /
# haproxy_tls per metric: ("max", x) at most x, ("min", x) at least x.
TLS_THROUGHPUT = (
    ("tls_produce", "TLS produce 1 KiB records"),
    ("tls_fetch", "TLS fetch 1 KiB records"),
)
# The proxy-bound workloads (krbench blast and canned): plaintext, TLS.
BLAST = (("blast_produce", "blast produce (proxy-bound)"),)
TLS_BLAST = (("tls_blast_produce", "TLS blast produce (proxy-bound)"),)
# The order of blast's -C pids (peer_cpu_window_s): the scripted upstream,
# then the proxy under test (absent, -1, for direct).
BLAST_PEERS = {"canned": 0, "proxy": 1}
# Issue 12: the peers' CPU per request at most this share of the proxy's.
BLAST_PEERS_LIMIT = 0.2
TLS_LIMITS = {
    "cpu_s_per_gib": ("max", 1.05),
    "mb_per_s": ("min", 0.95),
    "cpu_s_per_1000": ("max", 1.05),
    "bytes_per_conn": ("max", 1.00),
}
AUDIT_BATCHED = ("produce_1k", "produce_100", "fetch")
# Legacy translation through krelay (issue 10): krelay's CPU seconds per
# GiB translating an old client's Produce v2 / Fetch v2 at most this many
# times the same client's traffic passing through (ratio of the medians).
LEGACY = (("legacy_produce", "old producer (Produce v2, magic 1 -> v3)"),
          ("legacy_fetch", "old consumer (Fetch v2 -> v4, magic 1)"))
LEGACY_LIMIT = 3.0
GIB = float(1 << 30)
# A process that used at least this share of its CPU during the measured
# window is called saturated (it is pinned to one CPU).
SATURATED = 0.85
# Busy CPU of other processes (share of one CPU) above which a
# measurement is called disturbed.
OTHER_LOAD = 0.10


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def ratio_added(a, b):
    """Ratio of two added latencies; only meaningful when both are > 0."""
    if a is None or b is None or a <= 0 or b <= 0:
        return None
    return a / b


def ok_runs(runs, workload, target):
    return [r for r in runs
            if r["workload"] == workload and r["target"] == target
            and r.get("rc") == 0 and r.get("client")]


# Order of the -C pids run.sh passes (peer_cpu_window_s).
PEERS = {"mock": 0, "haproxy": 1, "krelay": 2, "krelay_a": 3, "krelay_b": 4,
         "krelay_audit": 5, "krelay_tls": 6, "haproxy_tls": 7,
         "krelay_sasl": 8}


def cpu_us_per_request(r, t):
    """The proxy t's CPU microseconds per request of one run: produce,
    its CPU inside the window over the requests the producer sent in it
    (its statistics' rate x the window); fetch, its CPU over the whole
    run over the responses the consumer read.  None when unknown."""
    c = r.get("client") or {}
    if c.get("mode") == "produce":
        peers = c.get("peer_cpu_window_s") or []
        i = PEERS.get(t)
        w = c.get("window_s") or 0
        n = (c.get("requests_per_s") or 0) * w
        if i is None or i >= len(peers) or peers[i] is None \
                or peers[i] < 0 or n <= 0:
            return None
        return peers[i] / n * 1e6
    n = c.get("responses") or 0
    cpu = r.get(t + "_cpu_s")
    if n <= 0 or cpu is None:
        return None
    return cpu / n * 1e6


def summarize_throughput(runs, workload):
    out = {}
    for t in TARGETS:
        rs = ok_runs(runs, workload, t)
        if not rs:
            continue
        entry = {
            "runs": len(rs),
            "mb_per_s": median([r["client"].get("mb_per_s") for r in rs]),
            "records_per_s": median(
                [r["client"].get("records_per_s") for r in rs]),
            "mb_per_s_all": [r["client"].get("mb_per_s") for r in rs],
        }
        # Utilisation inside the measured window (1.0 = one full CPU).
        # "other": busy CPU of the whole machine not used by the client,
        # the mock or the proxies (other load disturbing the run).
        utils = {k: [] for k in ("client",) + tuple(PEERS) + ("other",)}
        for r in rs:
            c = r["client"]
            w = c.get("window_s") or 0
            if w <= 0:
                continue
            mine = c.get("client_cpu_window_s", 0)
            utils["client"].append(mine / w)
            peers = c.get("peer_cpu_window_s") or []
            for name, i in PEERS.items():
                if i < len(peers) and peers[i] is not None and peers[i] >= 0:
                    utils[name].append(peers[i] / w)
                    mine += peers[i]
            sysw = c.get("system_cpu_window_s")
            if sysw is not None and sysw >= 0:
                utils["other"].append(max(0.0, sysw - mine) / w)
        entry["cpu_util"] = {k: round(median(v), 3)
                             for k, v in utils.items() if v}
        # The client's kernel share (produce): on loopback a sender also
        # runs the receiver's TCP input, so how a proxy reads shows here.
        ksys = [r["client"]["client_sys_window_s"] / r["client"]["window_s"]
                for r in rs if r["client"].get("client_sys_window_s")
                is not None and (r["client"].get("window_s") or 0) > 0]
        if ksys:
            entry["client_sys_util"] = round(median(ksys), 3)
        for f in ("request_bytes_avg", "rtt_us_avg", "response_bytes_avg",
                  "requests_per_s", "batch_records_avg"):
            v = [r["client"][f] for r in rs if r["client"].get(f)]
            if v:
                entry[f] = median(v)
        if t in PROXIES:
            v = [cpu_us_per_request(r, t) for r in rs]
            if any(x is not None for x in v):
                entry["cpu_us_per_request"] = round(median(v), 3)
        # CPU seconds per GiB of record bytes, over the whole client run.
        cpg = {}
        for name in ("mock",) + PROXIES:
            vals = []
            for r in rs:
                b = r["client"].get("total_bytes") or 0
                cpu = r.get(name + "_cpu_s")
                if b > 0 and cpu is not None:
                    vals.append(cpu / (b / GIB))
            if vals and (name == "mock" or name == t):
                cpg[name] = round(median(vals), 3)
        entry["cpu_s_per_gib"] = cpg
        bott = [k for k, v in entry["cpu_util"].items()
                if v >= SATURATED and k != "other"]
        entry["saturated"] = bott
        out[t] = entry
    res = {"targets": out}
    d = out.get("direct", {}).get("mb_per_s")
    h = out.get("haproxy", {}).get("mb_per_s")
    k = out.get("krelay", {}).get("mb_per_s")
    res["ratios"] = {
        "krelay_vs_haproxy": ratio(k, h),
        "krelay_vs_direct": ratio(k, d),
        "haproxy_vs_direct": ratio(h, d),
    }
    for t in ("krelay_audit", "krelay_sasl"):
        if t in out:
            res["ratios"][t + "_vs_krelay"] = ratio(out[t].get("mb_per_s"), k)
    if any(t in out for t in TLS):
        res["ratios"] = {"krelay_tls_vs_haproxy_tls": ratio(
            out.get("krelay_tls", {}).get("mb_per_s"),
            out.get("haproxy_tls", {}).get("mb_per_s"))}
    if "krelay_a" in out or "krelay_b" in out:
        res["ratios"] = {"krelay_b_vs_krelay_a": ratio(
            out.get("krelay_b", {}).get("mb_per_s"),
            out.get("krelay_a", {}).get("mb_per_s"))}
    return res


def blast_quota(meta):
    """The proxy's CPU cap in the blast workloads (a share of one CPU),
    from the meta key blast_proxy_quota; 0.0 when none."""
    try:
        return max(0.0, float(meta.get("blast_proxy_quota") or 0))
    except ValueError:
        return 0.0


def summarize_blast(runs, workload, quota=0.0):
    """blast_produce, tls_blast_produce: per target, the rates in the
    window (MB/s of record bytes, requests/s), the CPU shares (the
    client, the scripted upstream "canned", the proxy under its own name,
    "other"), the CPU microseconds per request of each, the peers' (client
    + canned) over the proxy's, and the proxy's CPU s per GiB over the
    whole client run.  quota: the share of one CPU the proxy was capped
    at (run.sh KRBENCH_BLAST_QUOTA; 0: none): saturated at SATURATED of
    that."""
    out = {}
    for t in TARGETS:
        rs = ok_runs(runs, workload, t)
        if not rs:
            continue
        proxy = None if t == "direct" else t
        utils, us, ratios, cpg = {}, {}, [], []
        for r in rs:
            c = r["client"]
            w = c.get("window_s") or 0
            n = c.get("requests") or 0
            if w <= 0 or n <= 0:
                continue
            peers = c.get("peer_cpu_window_s") or []
            cpu = {"client": c.get("client_cpu_window_s")}
            for name, i in BLAST_PEERS.items():
                v = peers[i] if i < len(peers) else None
                if v is not None and v >= 0:
                    cpu[proxy if name == "proxy" else name] = v
            cpu.pop(None, None)
            mine = 0.0
            for k, v in cpu.items():
                if v is None:
                    continue
                utils.setdefault(k, []).append(v / w)
                us.setdefault(k, []).append(v / n * 1e6)
                mine += v
            sysw = c.get("system_cpu_window_s")
            if sysw is not None and sysw >= 0:
                utils.setdefault("other", []).append(
                    max(0.0, sysw - mine) / w)
            if proxy in cpu and cpu[proxy] > 0 and \
                    cpu.get("client") is not None and "canned" in cpu:
                ratios.append((cpu["client"] + cpu["canned"]) / cpu[proxy])
            b = c.get("total_bytes") or 0
            whole = r.get(t + "_cpu_s")
            if b > 0 and whole is not None and proxy is not None:
                cpg.append(whole / (b / GIB))
        c0 = rs[0]["client"]
        entry = {
            "runs": len(rs),
            "mb_per_s": median([r["client"].get("mb_per_s") for r in rs]),
            "requests_per_s": median([r["client"].get("requests_per_s")
                                      for r in rs]),
            "records_per_s": median([r["client"].get("records_per_s")
                                     for r in rs]),
            "mb_per_s_all": [r["client"].get("mb_per_s") for r in rs],
            "requests_per_s_all": [r["client"].get("requests_per_s")
                                   for r in rs],
            "cpu_util": {k: round(median(v), 3) for k, v in utils.items()},
            "cpu_us_per_request": {k: round(median(v), 3)
                                   for k, v in us.items()},
            "request_bytes": c0.get("request_bytes"),
            "produce_version": c0.get("produce_version"),
            "connections": c0.get("connections"),
            "depth": c0.get("depth"),
            "bad_responses": sum(r["client"].get("bad_responses", 0)
                                 for r in rs),
        }
        if c0.get("tls"):
            entry["protocol"] = "%s %s %s" % (
                c0.get("version"), c0.get("cipher"), c0.get("group"))
        if proxy is not None:
            entry["cpu_s_per_gib"] = {proxy: None if not cpg
                                      else round(median(cpg), 3)}
            pr = median(ratios)
            entry["peers_vs_proxy_cpu_per_request"] = (
                None if pr is None else round(pr, 3))
            entry["peers_vs_proxy_cpu_per_request_all"] = [
                round(x, 3) for x in ratios]
        # the client and the scripted upstream share one CPU: saturated
        # together as "client+canned"
        u = entry["cpu_util"]
        sat = [k for k, v in u.items()
               if v >= SATURATED * (quota if quota > 0 and k == t else 1)
               and k not in ("other", "client", "canned")]
        if (u.get("client") or 0) + (u.get("canned") or 0) >= SATURATED:
            sat.append("client+canned")
        entry["saturated"] = sat
        out[t] = entry
    res = {"targets": out}
    g = {t: out.get(t, {}).get("mb_per_s") for t in TARGETS}
    if workload == "tls_blast_produce":
        res["ratios"] = {"krelay_tls_vs_haproxy_tls": ratio(
            g["krelay_tls"], g["haproxy_tls"])}
    else:
        res["ratios"] = {
            "krelay_vs_haproxy": ratio(g["krelay"], g["haproxy"]),
            "krelay_vs_direct": ratio(g["krelay"], g["direct"]),
            "haproxy_vs_direct": ratio(g["haproxy"], g["direct"]),
        }
    res["peers_limit"] = BLAST_PEERS_LIMIT
    return res


# blast_scale (issue 12, "every core"): krelay with 1 worker and with N,
# each the bottleneck between krbench blast and krbench canned.  The -C
# order of its runs (peer_cpu_window_s, peer_wait_window_s): the scripted
# upstream, krelay's process, krelay's audit writer thread.
SCALE_PEERS = {"canned": 0, "krelay": 1, "audit": 2}
# Issue 12's targets: the peers' CPU per request (generator + scripted
# upstream + krelay's audit writer) at most 0.2x krelay's; N workers at
# least 0.8 N times the requests/s of 1 ("2 workers >= 1.6x"); krelay's
# CPU per request not growing with N (at most 1.10x: the noise of a
# shared machine, paired ratios shown beside).
SCALE_LIMITS = {"peers_vs_krelay": 0.2, "requests_per_s_per_worker": 0.8,
                "cpu_per_request_ratio": 1.10}


def scale_legs(runs):
    """{N: [run, ...]} of the blast_scale runs that succeeded, by the
    worker count in their target's name (krelay_wN)."""
    legs = {}
    for r in runs:
        if r["workload"] != "blast_scale" or r.get("rc") != 0 \
                or not r.get("client") or \
                not r["target"].startswith("krelay_w"):
            continue
        try:
            n = int(r["target"][len("krelay_w"):])
        except ValueError:
            continue
        legs.setdefault(n, []).append(r)
    return legs


def scale_run(r):
    """One blast_scale run's figures (None when it has none): CPU
    microseconds per request of krelay (its process minus the audit
    writer thread), the generator, the scripted upstream, the audit
    writer and the peers (the last three and the generator); the peers'
    over krelay's; CPUs krelay used and CPUs' worth of its threads
    waiting runnable; other load (CPUs)."""
    c = r["client"]
    w, n = c.get("window_s") or 0, c.get("requests") or 0
    p = c.get("peer_cpu_window_s") or []
    pw = c.get("peer_wait_window_s") or []
    if w <= 0 or n <= 0 or len(p) < 2 or p[0] < 0 or p[1] < 0 or \
            c.get("client_cpu_window_s") is None:
        return None
    audit = p[2] if len(p) > 2 and p[2] >= 0 else 0.0
    kr = p[1] - audit
    gen, up = c["client_cpu_window_s"], p[0]
    peers = gen + up + audit
    out = {
        "rep": r["rep"],
        "requests_per_s": c.get("requests_per_s"),
        "krelay_us": kr / n * 1e6,
        "generator_us": gen / n * 1e6,
        "upstream_us": up / n * 1e6,
        "audit_writer_us": audit / n * 1e6,
        "peers_us": peers / n * 1e6,
        "peers_vs_krelay": peers / kr if kr > 0 else None,
        "krelay_cpus": kr / w,
    }
    if len(pw) > 1 and pw[1] >= 0:
        aw = pw[2] if len(pw) > 2 and pw[2] >= 0 else 0.0
        out["krelay_wait_cpus"] = (pw[1] - aw) / w
    sysw = c.get("system_cpu_window_s")
    if sysw is not None and sysw >= 0:
        out["other_cpus"] = max(0.0, sysw - p[1] - gen - up) / w
    total = c.get("total_requests") or 0
    if r.get("audit_clamped") is not None and total > 0:
        # lines of requests answered after the client's count (in flight
        # when it stopped) may add a little: at most 1
        out["clamped_share"] = min(1.0, r["audit_clamped"] / total)
    return out


def scale_verdict(v, limit, kind):
    if v is None:
        return "no data"
    ok = v <= limit if kind == "max" else v >= limit
    return "pass" if ok else "fail"


def summarize_scale(runs, meta):
    """blast_scale: per leg (worker count) the medians of scale_run's
    figures, and per leg beyond the 1-worker one its ratios to it (of the
    medians, and paired: within each repetition), the bound this machine
    puts on the requests/s ratio, and verdicts against SCALE_LIMITS."""
    legs = scale_legs(runs)
    try:
        ncpu = int(meta.get("ncpu") or 0)
    except ValueError:
        ncpu = 0
    try:
        quota = max(0.0, float(meta.get("scale_quota") or 0))
    except ValueError:
        quota = 0.0
    out = {"legs": {}, "scaling": {}, "limits": SCALE_LIMITS,
           "ncpu": ncpu, "quota_per_worker": quota,
           "workers_key": meta.get("scale_workers_key")}
    per = {}
    for n, rs in sorted(legs.items()):
        xs = [x for x in (scale_run(r) for r in rs) if x is not None]
        per[n] = {x["rep"]: x for x in xs}
        if not xs:
            continue
        keys = ("requests_per_s", "krelay_us", "generator_us",
                "upstream_us", "audit_writer_us", "peers_us",
                "peers_vs_krelay", "krelay_cpus", "krelay_wait_cpus",
                "other_cpus", "clamped_share")
        e = {"workers": n, "runs": len(xs)}
        for k in keys:
            v = median([x.get(k) for x in xs])
            e[k] = None if v is None else round(v, 4)
        e["requests_per_s_all"] = [x["requests_per_s"] for x in xs]
        e["peers_vs_krelay_all"] = [
            None if x["peers_vs_krelay"] is None
            else round(x["peers_vs_krelay"], 3) for x in xs]
        # krelay had work all along: its threads on a CPU or waiting for
        # one for nearly the whole window, every worker
        busy = (e["krelay_cpus"] or 0) + (e["krelay_wait_cpus"] or 0)
        e["krelay_bound"] = busy >= SATURATED * n * (quota or 1.0)
        e["verdict_peers"] = scale_verdict(
            e["peers_vs_krelay"], SCALE_LIMITS["peers_vs_krelay"], "max")
        out["legs"]["krelay_w%d" % n] = e
    base = out["legs"].get("krelay_w1")
    for n in sorted(per):
        leg = out["legs"].get("krelay_w%d" % n)
        if n == 1 or leg is None or base is None:
            continue
        rr = ratio(leg["requests_per_s"], base["requests_per_s"])
        cr = ratio(leg["krelay_us"], base["krelay_us"])
        reps = sorted(set(per[n]) & set(per[1]))
        prr = median([ratio(per[n][k]["requests_per_s"],
                            per[1][k]["requests_per_s"]) for k in reps])
        pcr = median([ratio(per[n][k]["krelay_us"], per[1][k]["krelay_us"])
                      for k in reps])
        # what the CPUs allow: workers on CPUs of their own while there
        # are more CPUs than workers, else every CPU shared with the
        # peers, whose share of the work is p / (1 + p); with a quota,
        # k workers get at most k x quota of that
        p = leg["peers_vs_krelay"] or 0.0

        def room(k, pp):
            if ncpu <= 0:
                return float(k) * (quota or 1.0)
            if quota > 0:
                return min(k * quota, ncpu / (1 + pp))
            return float(k) if ncpu > k else ncpu / (1 + pp)
        bound = room(n, p) / room(1, base["peers_vs_krelay"] or 0.0)
        want = SCALE_LIMITS["requests_per_s_per_worker"] * n
        out["scaling"]["krelay_w%d_vs_krelay_w1" % n] = {
            "workers": n,
            "requests_per_s_ratio": None if rr is None else round(rr, 3),
            "requests_per_s_ratio_paired": (None if prr is None
                                            else round(prr, 3)),
            "requests_per_s_ratio_limit": want,
            "requests_per_s_ratio_bound": round(bound, 3),
            "cpu_per_request_ratio": None if cr is None else round(cr, 3),
            "cpu_per_request_ratio_paired": (None if pcr is None
                                             else round(pcr, 3)),
            "cpu_per_request_ratio_limit":
                SCALE_LIMITS["cpu_per_request_ratio"],
            "verdict_requests_per_s": scale_verdict(rr, want, "min"),
            "verdict_cpu_per_request": scale_verdict(
                cr, SCALE_LIMITS["cpu_per_request_ratio"], "max"),
            "paired_repetitions": len(reps),
        }
    return out


def scale_table(res):
    sc = res.get("workloads", {}).get("blast_scale")
    if not sc or not sc.get("legs"):
        return []
    m = res.get("meta", {})
    lines = ["", "Scaling with workers (blast_scale, issue 12): %s "
             "connections x %s in flight of Produce v%s (%s record of %s "
             "bytes), clamped to v%s, every request audited (%s); "
             "placement (taskset, krelay / peers and audit writer): %s" % (
                 m.get("scale_conns"), m.get("scale_depth"),
                 m.get("scale_produce_version"), m.get("scale_records"),
                 m.get("scale_record_bytes"), m.get("scale_clamp_version"),
                 m.get("scale_audit_dir") or "file",
                 m.get("scale_cpus") or "?") + (
                     "; workers capped at %s of a CPU each (cgroup)" %
                     m.get("scale_quota")
                     if float(m.get("scale_quota") or 0) > 0 else ""), "",
             "| krelay | requests/s | krelay CPU µs/request | generator | "
             "scripted upstream | audit writer | peers / krelay | krelay "
             "CPUs busy + waiting | other load, CPUs | clamped |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for t, e in sorted(sc["legs"].items(), key=lambda kv: kv[1]["workers"]):
        lines.append("| %d worker%s | %s | %s | %s | %s | %s | %s | %s + %s "
                     "| %s | %s |" % (
                         e["workers"], "" if e["workers"] == 1 else "s",
                         fmt(e["requests_per_s"]), fmt(e["krelay_us"], 2),
                         fmt(e["generator_us"], 2), fmt(e["upstream_us"], 2),
                         fmt(e["audit_writer_us"], 2),
                         fmtr(e["peers_vs_krelay"]), fmt(e["krelay_cpus"], 2),
                         fmt(e["krelay_wait_cpus"], 2),
                         fmt(e["other_cpus"], 2), pct(e["clamped_share"])))
    lines.extend(["", "| issue 12's target | measured | limit | verdict |",
                  "|---|---:|---:|---|"])
    for t, e in sorted(sc["legs"].items(), key=lambda kv: kv[1]["workers"]):
        pv = e["peers_vs_krelay"]
        lines.append("| peers' CPU per request / krelay's, %s | %s | at most "
                     "%s | %s |" % (t, "–" if pv is None else "%.3fx" % pv,
                                    fmtr(sc["limits"]["peers_vs_krelay"]),
                                    e["verdict_peers"]))
    for k, s in sorted(sc["scaling"].items(), key=lambda kv:
                       kv[1]["workers"]):
        n = s["workers"]
        lines.append("| requests/s, %d workers / 1 (paired) | %s (%s) | at "
                     "least %s (this machine allows about %s) | %s |" % (
                         n, fmtr(s["requests_per_s_ratio"]),
                         fmtr(s["requests_per_s_ratio_paired"]),
                         fmtr(s["requests_per_s_ratio_limit"]),
                         fmtr(s["requests_per_s_ratio_bound"]),
                         s["verdict_requests_per_s"]))
        lines.append("| krelay CPU per request, %d workers / 1 (paired) | %s "
                     "(%s) | at most %s | %s |" % (
                         n, fmtr(s["cpu_per_request_ratio"]),
                         fmtr(s["cpu_per_request_ratio_paired"]),
                         fmtr(s["cpu_per_request_ratio_limit"]),
                         s["verdict_cpu_per_request"]))
    return lines


def scale_notes(res):
    sc = res.get("workloads", {}).get("blast_scale")
    if not sc:
        return []
    notes = []
    if res.get("meta", {}).get("scale_audit_thread") == "unnamed":
        notes.append("blast_scale: krelay has no thread named krelay-audit "
                     "(a build before it was named): its audit writer's "
                     "CPU counts as krelay's, not the peers'")
    if sc.get("workers_key") == "rejected":
        notes.append("blast_scale: this krelay does not know [process] "
                     "workers: only the 1-worker leg ran (without the key)")
    for t, e in sorted(sc["legs"].items(), key=lambda kv: kv[1]["workers"]):
        busy = (e["krelay_cpus"] or 0) + (e["krelay_wait_cpus"] or 0)
        if not e["krelay_bound"]:
            notes.append("blast_scale via %s: NOT krelay-bound (its threads "
                         "busy or waiting for a CPU %.2f CPUs' worth of the "
                         "window, under %.0f%% of %g)" % (
                             t, busy, 100 * SATURATED,
                             e["workers"] * (sc.get("quota_per_worker")
                                             or 1.0)))
        elif (e["krelay_wait_cpus"] or 0) >= 0.1 * e["workers"]:
            notes.append("blast_scale via %s: krelay is the bottleneck but "
                         "was held back by other load (on a CPU %.2f, "
                         "waiting for one %.2f CPUs' worth): requests/s "
                         "depend on the machine's other load" % (
                             t, e["krelay_cpus"], e["krelay_wait_cpus"]))
        if e.get("clamped_share") is not None and e["clamped_share"] < 0.9:
            notes.append("blast_scale via %s: only %s of the requests have "
                         "an audit line with \"clamped\": not the workload "
                         "described" % (t, pct(e["clamped_share"])))
    for k, s in sc["scaling"].items():
        rr = s["requests_per_s_ratio"]
        if rr is not None and rr > 1.05 * s["requests_per_s_ratio_bound"]:
            notes.append("blast_scale: %d workers / 1 = %.2fx, above the "
                         "%.2fx the CPUs allow: other load took CPU time "
                         "per thread, and more threads got more of it; the "
                         "ratio says little here (run it on a quiet "
                         "machine)" % (s["workers"], rr,
                                       s["requests_per_s_ratio_bound"]))
        if s["requests_per_s_ratio_bound"] < s["requests_per_s_ratio_limit"]:
            notes.append("blast_scale: %d workers on %d CPUs share them with "
                         "the peers: at most about %.2fx the requests/s of "
                         "one worker here, below issue 12's %.1fx; judge the "
                         "scaling on a machine with more CPUs than workers, "
                         "or with KRBENCH_SCALE_QUOTA (README.md, "
                         "blast_scale)" % (
                             s["workers"], sc["ncpu"],
                             s["requests_per_s_ratio_bound"],
                             s["requests_per_s_ratio_limit"]))
    return notes


def latency_legs(runs):
    """(rep, target, leg, run) for every latency measurement: a separate
    run per target (method "separate": leg = the client's JSON), or one
    run with the targets interleaved (target "interleaved": leg = the
    client's "targets" entry)."""
    legs = []
    for r in runs:
        if r["workload"] != "latency" or r.get("rc") != 0 \
                or not r.get("client"):
            continue
        if r["target"] == "interleaved":
            for t, leg in (r["client"].get("targets") or {}).items():
                legs.append((r["rep"], t, leg, r))
        elif r["target"] in TARGETS:
            legs.append((r["rep"], r["target"], r["client"], r))
    return legs


def window_util(c):
    """CPU shares inside a client's measured window (1.0 = one CPU):
    client, mock, haproxy, krelay and other (the rest of the machine)."""
    w = c.get("window_s") or 0
    if w <= 0 or "client_cpu_window_s" not in c:
        return {}
    mine = c["client_cpu_window_s"]
    u = {"client": mine / w}
    peers = c.get("peer_cpu_window_s") or []
    for name, i in PEERS.items():
        if i < len(peers) and peers[i] is not None and peers[i] >= 0:
            u[name] = peers[i] / w
            mine += peers[i]
    sysw = c.get("system_cpu_window_s")
    if sysw is not None and sysw >= 0:
        u["other"] = max(0.0, sysw - mine) / w
    return u


def summarize_latency(runs):
    out = {}
    by_rep = {}
    legs = latency_legs(runs)
    method = ("interleaved" if any(r["target"] == "interleaved"
                                   for _, _, _, r in legs) else "separate")
    for t in TARGETS:
        ls = [(rep, leg, r) for rep, tt, leg, r in legs if tt == t]
        if not ls:
            continue
        out[t] = {"runs": len(ls)}
        for p in ("p50_us", "p99_us", "p999_us", "mean_us", "max_us"):
            out[t][p] = median([leg.get(p) for _, leg, _ in ls])
        for p in ("p50_us", "p99_us", "p999_us"):
            out[t][p + "_all"] = [leg.get(p) for _, leg, _ in ls]
        others = []
        for _, leg, r in ls:
            u = window_util(r["client"])
            if "other" in u:
                others.append(u["other"])
                continue
            if r.get("system_cpu_s") is None or not r.get("wall_s"):
                continue
            mine = (r["client"].get("client_cpu_s", 0) + r.get("mock_cpu_s", 0)
                    + r.get("haproxy_cpu_s", 0) + r.get("krelay_cpu_s", 0)
                    + r.get("krelay_audit_cpu_s", 0)
                    + r.get("krelay_sasl_cpu_s", 0))
            others.append(max(0.0, r["system_cpu_s"] - mine) / r["wall_s"])
        out[t]["other_cpu_util"] = median(others)
        if method == "separate":
            # CPU shares in this target's own windows (krbench -C).
            utils = {}
            for _, _, r in ls:
                for k, v in window_util(r["client"]).items():
                    utils.setdefault(k, []).append(v)
            if utils:
                out[t]["cpu_util"] = {k: round(median(v), 3)
                                      for k, v in utils.items()}
        out[t]["sent"] = sum(leg.get("sent", 0) for _, leg, _ in ls)
        out[t]["lost"] = sum(leg.get("lost", 0) for _, leg, _ in ls)
        out[t]["late_sends"] = sum(leg.get("late", 0) for _, leg, _ in ls)
        out[t]["late_1ms"] = sum(leg.get("late_1ms", 0) for _, leg, _ in ls)
        for rep, leg, _ in ls:
            by_rep.setdefault(rep, {})[t] = leg
    added = {}
    ab = tuple(t for t in AB if t in out)
    if ab:
        # A/B: "added" only when the direct leg ran too
        proxies = ab if "direct" in out else ()
    else:
        proxies = ("haproxy", "krelay")
    for t in proxies:
        vals = {}
        for p in ("p50_us", "p99_us", "p999_us"):
            diffs = [reps[t][p] - reps["direct"][p]
                     for _, reps in sorted(by_rep.items())
                     if t in reps and "direct" in reps]
            vals[p] = median(diffs)
            vals[p + "_all"] = [round(d, 2) for d in diffs]
        if any(v is not None for v in vals.values()):
            added[t] = vals
    res = {"method": method, "targets": out, "added_us": added}
    # CPU shares in the measured windows of the interleaved runs (the
    # same window for every target): is the mock or the client saturated?
    utils = {}
    for r in runs:
        if r["workload"] == "latency" and r["target"] == "interleaved" \
                and r.get("rc") == 0 and r.get("client"):
            for k, v in window_util(r["client"]).items():
                utils.setdefault(k, []).append(v)
    if utils:
        res["cpu_util"] = {k: round(median(v), 3) for k, v in utils.items()}
    res["ratios"] = {
        "added_p99_krelay_vs_haproxy": ratio_added(
            added.get("krelay", {}).get("p99_us"),
            added.get("haproxy", {}).get("p99_us")),
    }
    if "krelay_a" in out or "krelay_b" in out:
        res["ratios"] = {"p99_krelay_b_vs_krelay_a": ratio(
            out.get("krelay_b", {}).get("p99_us"),
            out.get("krelay_a", {}).get("p99_us"))}
    return res


def idle_per_conn(r, key="rss"):
    """(key_after_kb - key_before_kb) in bytes per idle connection of an
    idle run (key: rss = VmRSS, rss_anon, rss_shmem); None if unknown."""
    n = r["client"].get("idle") or 0
    a, b = r.get(key + "_after_kb"), r.get(key + "_before_kb")
    if n <= 0 or a is None or b is None or (key == "rss" and
                                             (not a or not b)):
        return None
    return (a - b) * 1024.0 / n


def summarize_idle(runs, workload="idle", targets=("haproxy", "krelay")):
    out = {}
    for t in targets:
        rs = [r for r in runs if r["workload"] == workload
              and r["target"] == t and r.get("client")]
        vals = [v for v in (idle_per_conn(r) for r in rs) if v is not None]
        if rs:
            out[t] = {
                "runs": len(rs),
                "connections": median([r["client"].get("idle")
                                       for r in rs]),
                "failed": sum(r["client"].get("failed", 0) for r in rs),
                "alive_at_end": median([r["client"].get("alive_at_end")
                                        for r in rs]),
                "bytes_per_conn": median(vals),
                "bytes_per_conn_all": [round(v) for v in vals],
                "rss_before_kb": median([r.get("rss_before_kb")
                                         for r in rs]),
                "rss_after_kb": median([r.get("rss_after_kb") for r in rs]),
            }
            for k in ("rss_anon", "rss_shmem"):
                v = [idle_per_conn(r, k) for r in rs]
                if any(x is not None for x in v):
                    out[t][k + "_bytes_per_conn"] = median(v)
    a, b = targets[1], targets[0]
    return {"targets": out, "ratios": {"%s_vs_%s" % (a, b): ratio(
        out.get(a, {}).get("bytes_per_conn"),
        out.get(b, {}).get("bytes_per_conn"))}}


def handshake_cpu(r, t):
    """The proxy t's CPU seconds per 1,000 handshakes of one run."""
    n = (r.get("client") or {}).get("handshakes") or 0
    cpu = r.get(t + "_cpu_s")
    if n <= 0 or cpu is None:
        return None
    return cpu / n * 1000.0


def summarize_handshake(runs):
    """tls_handshake: per TLS target, the proxy's CPU per 1,000 full
    handshakes (its CPU over the client run, schedstat), medians."""
    out = {}
    for t in TLS:
        rs = ok_runs(runs, "tls_handshake", t)
        if not rs:
            continue
        c0 = rs[0]["client"]
        cpu = [handshake_cpu(r, t) for r in rs]
        utils = {}
        for r in rs:
            for k, v in window_util(r["client"]).items():
                utils.setdefault(k, []).append(v)
        out[t] = {
            "runs": len(rs),
            "handshakes": median([r["client"].get("handshakes")
                                  for r in rs]),
            "handshakes_per_s": median([r["client"].get("handshakes_per_s")
                                        for r in rs]),
            "cpu_s_per_1000": median(cpu),
            "cpu_s_per_1000_all": [None if v is None else round(v, 4)
                                   for v in cpu],
            "client_cpu_s_per_1000": median([
                r["client"]["client_cpu_s"] / r["client"]["handshakes"]
                * 1000.0 for r in rs if r["client"].get("handshakes")]),
            "mock_cpu_s_per_1000": median([
                r.get("mock_cpu_s", 0) / r["client"]["handshakes"] * 1000.0
                for r in rs if r["client"].get("handshakes")]),
            "protocol": "%s %s %s" % (c0.get("version"), c0.get("cipher"),
                                      c0.get("group")),
            "cpu_util": {k: round(median(v), 3) for k, v in utils.items()},
        }
    return {"targets": out, "ratios": {"krelay_tls_vs_haproxy_tls": ratio(
        out.get("krelay_tls", {}).get("cpu_s_per_1000"),
        out.get("haproxy_tls", {}).get("cpu_s_per_1000"))}}


def tls_per_rep(runs, workload, metric):
    """{target: {rep: value}} of krelay_tls and haproxy_tls."""
    per = {}
    for t in TLS:
        if workload == "tls_idle":
            rs = [r for r in runs if r["workload"] == workload
                  and r["target"] == t and r.get("client")
                  and r.get("rc") == 0]
        else:
            rs = ok_runs(runs, workload, t)
        for r in rs:
            c = r["client"]
            v = None
            if metric == "mb_per_s":
                v = c.get("mb_per_s")
            elif metric == "cpu_s_per_gib":
                b = c.get("total_bytes") or 0
                cpu = r.get(t + "_cpu_s")
                v = cpu / (b / GIB) if b > 0 and cpu is not None else None
            elif metric == "cpu_s_per_1000":
                v = handshake_cpu(r, t)
            elif metric == "bytes_per_conn":
                v = idle_per_conn(r)
            if v is not None:
                per.setdefault(t, {})[r["rep"]] = v
    return per


def tls_verdict(r, limit):
    if r is None:
        return "no data"
    kind, x = limit
    if kind == "max":
        return "within" if r <= x else "over"
    return "within" if r >= x else "under"


def summarize_tls(res):
    """The tls section: krelay_tls against haproxy_tls, per case (the
    issue's targets), medians over repetitions and within each (paired:
    the two ran back to back in it)."""
    runs = res["runs"]
    cases = []
    plan = [(wl, m) for wl, _ in TLS_THROUGHPUT + TLS_BLAST
            for m in ("cpu_s_per_gib", "mb_per_s")]
    plan += [("tls_handshake", "cpu_s_per_1000"),
             ("tls_idle", "bytes_per_conn")]
    for wl, m in plan:
        if not any(r["workload"] == wl for r in runs):
            continue
        per = tls_per_rep(runs, wl, m)
        k, h = per.get("krelay_tls", {}), per.get("haproxy_tls", {})
        mk, mh = median(list(k.values())), median(list(h.values()))
        r = ratio(mk, mh)
        paired = [k[i] / h[i] for i in sorted(k) if i in h and h[i]]
        pr = median(paired) if paired else None
        lim = TLS_LIMITS[m]
        cases.append({
            "workload": wl, "metric": m,
            "krelay_tls": mk, "haproxy_tls": mh,
            "ratio": None if r is None else round(r, 4),
            "krelay_tls_all": [round(k[i], 4) for i in sorted(k)],
            "haproxy_tls_all": [round(h[i], 4) for i in sorted(h)],
            "paired_ratio": None if pr is None else round(pr, 4),
            "paired_ratios_all": [round(x, 4) for x in paired],
            "runs": [len(k), len(h)],
            "limit": "%s %.2fx" % ("at most" if lim[0] == "max"
                                   else "at least", lim[1]),
            "verdict": tls_verdict(r, lim),
            "paired_verdict": tls_verdict(pr, lim),
        })
    return {"cases": cases}


TLS_LABELS = {
    "cpu_s_per_gib": "proxy CPU s per GiB",
    "mb_per_s": "MB/s",
    "cpu_s_per_1000": "proxy CPU s per 1,000 full handshakes",
    "bytes_per_conn": "RSS per idle TLS connection, bytes",
}


def tls_table(res):
    tl = res.get("tls") or {}
    if not tl.get("cases"):
        return []
    m = res["meta"]
    w = res["workloads"]
    names = dict(TLS_THROUGHPUT + TLS_BLAST)
    names["tls_handshake"] = "TLS handshakes (%s per repetition)" % (
        m.get("handshakes"))
    names["tls_idle"] = "TLS idle (%s connections)" % m.get("tls_idle_conns")
    lines = ["", "TLS termination (issue 8): krelay_tls and haproxy_tls "
             "(1 thread), %s, plaintext to the mock; medians over "
             "repetitions, x = krelay_tls / haproxy_tls (paired: median of "
             "the per-repetition ratios)." % m.get("tls", "TLS 1.3"), "",
             "| case | HAProxy | krelay | x | x (paired) | target | "
             "verdict |", "|---|---:|---:|---:|---:|---|---|"]
    for c in tl["cases"]:
        dg = {"cpu_s_per_gib": 3, "cpu_s_per_1000": 3}.get(c["metric"], 0)
        lines.append("| %s, %s | %s | %s | %s | %s | %s | %s |" % (
            names.get(c["workload"], c["workload"]),
            TLS_LABELS.get(c["metric"], c["metric"]),
            fmt(c["haproxy_tls"], dg), fmt(c["krelay_tls"], dg),
            fmtr(c["ratio"]), fmtr(c["paired_ratio"]), c["limit"],
            c["verdict"] if c["paired_verdict"] == c["verdict"]
            else "%s (paired: %s)" % (c["verdict"], c["paired_verdict"])))
    hs = w.get("tls_handshake", {}).get("targets", {})
    for t in TLS:
        if t in hs:
            lines.append("- handshakes via %s: %s, %s/s, the client %s s and "
                         "the mock %s s of CPU per 1,000" % (
                             t, hs[t]["protocol"],
                             fmt(hs[t]["handshakes_per_s"]),
                             fmt(hs[t]["client_cpu_s_per_1000"], 3),
                             fmt(hs[t]["mock_cpu_s_per_1000"], 3)))
    lines.extend(blast_lines(w, "tls_blast_produce"))
    idle = w.get("tls_idle", {}).get("targets", {})
    for t in TLS:
        if t in idle:
            lines.append("- idle via %s: RSS per connection %s bytes, of "
                         "which anonymous %s, shared memory %s" % (
                             t, fmt(idle[t].get("bytes_per_conn")),
                             fmt(idle[t].get("rss_anon_bytes_per_conn")),
                             fmt(idle[t].get("rss_shmem_bytes_per_conn"))))
    return lines


def blast_lines(w, key):
    """Bullets under a table: per target of a blast workload, who used
    how much CPU per request and the peers / proxy ratio."""
    lines = []
    bl = w.get(key, {})
    for t, v in bl.get("targets", {}).items():
        u, us = v.get("cpu_util", {}), v.get("cpu_us_per_request", {})
        who = ", ".join("%s %s (%s µs/request)" % (
            k, pct(u.get(k)), fmt(us.get(k), 2))
            for k in ["client", "canned"] + ([t] if t in u else []))
        pr = v.get("peers_vs_proxy_cpu_per_request")
        lines.append("- %s via %s: %s requests/s of %s bytes (%s "
                     "connections x %s in flight, Produce v%s); CPU in the "
                     "window: %s%s" % (
                         key, t, fmt(v.get("requests_per_s")),
                         fmt(v.get("request_bytes")), v.get("connections"),
                         v.get("depth"), v.get("produce_version"), who,
                         "" if pr is None else
                         "; peers / proxy CPU per request %.2fx (issue 12: "
                         "at most %.1fx)" % (pr, bl.get("peers_limit",
                                                         BLAST_PEERS_LIMIT))))
    return lines


def summarize_codec(runs):
    rs = [r for r in runs if r["workload"] == "codec" and r.get("rc") == 0
          and r.get("client", {}).get("benches")]
    out = {}
    for r in rs:
        for b in r["client"]["benches"]:
            out.setdefault(b["name"], []).append(b)
    res = {}
    for name, bs in out.items():
        res[name] = {k: median([b.get(k) for b in bs])
                     for k in ("payload_bytes", "ops_per_s", "mb_per_s",
                               "decode_ops_per_s", "memcpy_mb_per_s",
                               "ratio_to_memcpy")}
        res[name]["runs"] = len(bs)
    return {"runs": len(rs), "benches": res}


def summarize_auditline(runs):
    """bench_audit: median ns per operation of each piece of an audit
    line (and the sink's process-wide figure)."""
    rs = [r for r in runs if r["workload"] == "auditline"
          and r.get("rc") == 0 and r.get("client", {}).get("benches")]
    out = {}
    for r in rs:
        for b in r["client"]["benches"]:
            out.setdefault(b["name"], []).append(b)
    res = {}
    for name, bs in out.items():
        res[name] = {k: median([b.get(k) for b in bs])
                     for k in ("ns_per_op", "bytes", "process_ns_per_op",
                               "dropped")
                     if any(b.get(k) is not None for b in bs)}
        res[name]["runs"] = len(bs)
    lb = [r["client"].get("line_bytes") for r in rs]
    return {"runs": len(rs), "line_bytes": median(lb), "benches": res}


def summarize_records(runs):
    """bench_records (issue 10): median MB/s and records/s of each
    conversion (up_V: Produce v0-2 -> RecordBatch v2, down_V: Fetch v0-3
    <- v2; MB of the old client's message set)."""
    rs = [r for r in runs if r["workload"] == "records"
          and r.get("rc") == 0 and r.get("client", {}).get("benches")]
    out = {}
    for r in rs:
        for b in r["client"]["benches"]:
            out.setdefault(b["name"], []).append(b)
    res = {}
    for name, bs in out.items():
        res[name] = {k: median([b.get(k) for b in bs])
                     for k in ("value_bytes", "set_bytes", "mb_per_s",
                               "records_per_s", "memcpy_mb_per_s")}
        res[name]["runs"] = len(bs)
    return {"runs": len(rs), "benches": res}


def summarize_legacy(runs):
    """legacy_produce / legacy_fetch (issue 10): per workload, the medians
    of krelay's CPU seconds per GiB of values, translated and passing
    through, their ratio (of the medians; and the median of the
    per-repetition ratios, "paired") against LEGACY_LIMIT.  A translated
    run that did not translate fails the workload (rc 5: "not
    translated")."""
    out = {}
    for key, label in LEGACY:
        rs = [r for r in runs if r["workload"] == key]
        if not rs:
            continue
        e = {"label": label, "limit": LEGACY_LIMIT}
        per = {}
        for tg in ("translated", "passthrough"):
            ok = [r for r in rs if r["target"] == tg and r.get("rc") == 0
                  and r.get("client", {}).get("value_bytes")]
            for r in ok:
                per.setdefault(r["rep"], {})[tg] = (
                    r["krelay_cpu_s"] / (r["client"]["value_bytes"] / GIB))
            e[tg] = {
                "runs": len(ok),
                "cpu_s_per_gib": median(
                    [r["krelay_cpu_s"] / (r["client"]["value_bytes"] / GIB)
                     for r in ok]),
                "mb_per_s": median([r["client"].get("mb_per_s")
                                    for r in ok]),
                "records_in": median([r.get("legacy", {}).get("records_in")
                                      for r in ok]),
                "translated_requests": median(
                    [r.get("legacy", {}).get("translated") for r in ok]),
            }
        e["ratio"] = ratio(e["translated"]["cpu_s_per_gib"],
                           e["passthrough"]["cpu_s_per_gib"])
        e["paired"] = median([ratio(v.get("translated"),
                                    v.get("passthrough"))
                              for v in per.values()])
        bad = [r for r in rs if r.get("rc") != 0]
        e["failed_runs"] = [{"target": r["target"], "rep": r["rep"],
                             "rc": r.get("rc"), "check": r.get("check")}
                            for r in bad]
        if any(r.get("rc") == 5 for r in bad):
            e["verdict"] = "fail (not translated)"
        elif bad:
            e["verdict"] = "fail (%d runs failed)" % len(bad)
        elif e["ratio"] is None:
            e["verdict"] = "no data"
        else:
            e["verdict"] = "pass" if e["ratio"] <= LEGACY_LIMIT else "fail"
        out[key] = e
    return out


def legacy_table(res):
    lg = res.get("workloads", {}).get("legacy")
    if not lg:
        return []
    lines = ["", "| legacy translation through krelay (issue 10; kcat, 1 KiB "
             "values) | krelay CPU s/GiB translated | pass-through | "
             "translated / pass-through (paired) | limit | MB/s translated "
             "/ pass-through | verdict |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for key, label in LEGACY:
        e = lg.get(key)
        if not e:
            continue
        t, p = e["translated"], e["passthrough"]
        lines.append("| %s | %s | %s | %s (%s) | %s | %s / %s | %s |" % (
            label, fmt(t["cpu_s_per_gib"], 3), fmt(p["cpu_s_per_gib"], 3),
            fmtr(e["ratio"]), fmtr(e["paired"]), fmtr(e["limit"]),
            fmt(t["mb_per_s"]), fmt(p["mb_per_s"]), e["verdict"]))
    return lines


def is_ab(res):
    return res.get("meta", {}).get("ab") == "1"


def ab_verdict(r, limit, runs):
    """One case's verdict: its ratio B/A r against limit (None: no
    verdict, the case is informative), runs = (A's, B's) repetitions."""
    if r is None:
        return "no data"
    if limit is None:
        return "info"
    if min(runs) < AB_MIN_RUNS:
        return "too few runs"
    if r > 1 + limit:
        return "worse"
    if r < 1 - limit:
        return "better"
    return "within"


def ab_case(workload, metric, per_rep, limit):
    """per_rep: {target: {rep: value}} for krelay_a and krelay_b.  The
    medians over repetitions, B/A of the medians (what the verdict
    reads: the issue's definition) and the median of B/A within each
    repetition (paired: A and B met the same conditions there, so it
    sees a small shift that the medians of two noisy series can hide;
    its own verdict is "paired_verdict")."""
    a = per_rep.get("krelay_a", {})
    b = per_rep.get("krelay_b", {})
    ma = median(list(a.values()))
    mb = median(list(b.values()))
    r = ratio(mb, ma)
    paired = [b[k] / a[k] for k in sorted(a) if k in b and a[k]]
    pr = median(paired) if paired else None
    return {
        "workload": workload,
        "metric": metric,
        "a": ma,
        "b": mb,
        "ratio": None if r is None else round(r, 4),
        "a_all": [a[k] for k in sorted(a)],
        "b_all": [b[k] for k in sorted(b)],
        "paired_ratio": None if pr is None else round(pr, 4),
        "paired_ratios_all": [round(x, 4) for x in paired],
        "runs": [len(a), len(b)],
        "limit": limit,
        "verdict": ab_verdict(r, limit, (len(a), len(b))),
        "paired_verdict": ab_verdict(pr, limit, (len(paired),) * 2),
    }


def summarize_ab(res):
    """The A/B section: krelay_b against krelay_a, per case."""
    m = res["meta"]
    runs = res["runs"]
    cases = []
    for key, _ in THROUGHPUT:
        if not any(r["workload"] == key for r in runs):
            continue
        cpg = {}
        mbs = {}
        for t in AB:
            for r in ok_runs(runs, key, t):
                b = r["client"].get("total_bytes") or 0
                cpu = r.get(t + "_cpu_s")
                if b > 0 and cpu is not None:
                    cpg.setdefault(t, {})[r["rep"]] = cpu / (b / GIB)
                if r["client"].get("mb_per_s") is not None:
                    mbs.setdefault(t, {})[r["rep"]] = r["client"]["mb_per_s"]
        cases.append(ab_case(key, "cpu_s_per_gib", cpg,
                             AB_LIMITS["cpu_s_per_gib"]))
        cases.append(ab_case(key, "mb_per_s", mbs, None))
    legs = latency_legs(runs)
    if legs:
        for p in ("p99_us", "p50_us", "p999_us"):
            per = {}
            for rep, t, leg, _ in legs:
                if t in AB and leg.get(p) is not None:
                    per.setdefault(t, {})[rep] = leg[p]
            cases.append(ab_case("latency", p, per, AB_LIMITS.get(p)))
    judged = [c for c in cases if c["limit"] is not None]
    if any(c["verdict"] == "worse" for c in judged):
        verdict = "fail"
    elif not judged or any(c["verdict"] not in ("within", "better")
                           for c in judged):
        verdict = "incomplete"
    else:
        verdict = "pass"
    return {
        "a": {"label": m.get("label_a"), "binary": m.get("krelay_a"),
              "version": m.get("krelay_a_version"),
              "sha256": m.get("krelay_a_sha256")},
        "b": {"label": m.get("label_b"), "binary": m.get("krelay_b"),
              "version": m.get("krelay_b_version"),
              "sha256": m.get("krelay_b_sha256")},
        "limits": dict(AB_LIMITS),
        "min_runs": AB_MIN_RUNS,
        "cases": cases,
        "verdict": verdict,
    }


def versus_krelay(runs, key, other):
    """Target other against krelay in one throughput workload key: per
    metric (mb_per_s, cpu_s_per_gib, cpu_us_per_request) the medians over
    repetitions, their ratio other / krelay, the median of the
    per-repetition ratios ("paired": the two legs ran back to back in
    each), every repetition's value, and for CPU µs per request what
    other adds (of the medians, and paired).  {} when either is missing."""
    per = {}                            # metric -> target -> rep -> value
    for t in ("krelay", other):
        for r in ok_runs(runs, key, t):
            c = r["client"]
            b = c.get("total_bytes") or 0
            cpu = r.get(t + "_cpu_s")
            vals = {"mb_per_s": c.get("mb_per_s"),
                    "cpu_s_per_gib": cpu / (b / GIB)
                    if b > 0 and cpu is not None else None,
                    "cpu_us_per_request": cpu_us_per_request(r, t)}
            for m, v in vals.items():
                if v is not None:
                    per.setdefault(m, {}).setdefault(t, {})[r["rep"]] = v
    e = {}
    for m, v in per.items():
        if other not in v or "krelay" not in v:
            continue
        k, a = v["krelay"], v[other]
        mk, ma = median(list(k.values())), median(list(a.values()))
        paired = [a[i] / k[i] for i in sorted(k) if i in a and k[i]]
        e[m] = {
            "krelay": round(mk, 3), other: round(ma, 3),
            "ratio": None if ratio(ma, mk) is None
            else round(ratio(ma, mk), 4),
            "paired_ratio": round(median(paired), 4) if paired else None,
            "krelay_all": [round(k[i], 3) for i in sorted(k)],
            other + "_all": [round(a[i], 3) for i in sorted(a)],
        }
        if m == "cpu_us_per_request":
            d = [a[i] - k[i] for i in sorted(k) if i in a]
            e[m]["added"] = round(ma - mk, 3)
            e[m]["paired_added"] = round(median(d), 3) if d else None
    return e


def summarize_audit(res):
    """The audit section: krelay_audit against krelay, per throughput
    workload (versus_krelay), with issue 14's targets."""
    runs = res["runs"]
    out = {}
    for key, _ in THROUGHPUT:
        e = versus_krelay(runs, key, "krelay_audit")
        if not e:
            continue
        lines = [r["audit_lines"] for r in ok_runs(runs, key, "krelay_audit")
                 if r.get("audit_lines") is not None]
        e["audit_lines"] = median(lines)
        if key in AUDIT_BATCHED and "cpu_s_per_gib" in e:
            r = e["cpu_s_per_gib"]["ratio"]
            e["target"] = "CPU s per GiB at most %.2fx krelay's" % (
                AUDIT_LIMITS["cpu_s_per_gib_ratio"])
            e["verdict"] = ("no data" if r is None else "within"
                            if r <= AUDIT_LIMITS["cpu_s_per_gib_ratio"]
                            else "over")
        elif key == "produce_1rec" and "cpu_us_per_request" in e:
            a = e["cpu_us_per_request"]["added"]
            e["target"] = "at most %g µs of CPU added per request" % (
                AUDIT_LIMITS["added_us_per_request"])
            e["verdict"] = ("no data" if a is None else "within"
                            if a <= AUDIT_LIMITS["added_us_per_request"]
                            else "over")
        out[key] = e
    return out


def audit_table(res):
    au = res.get("audit") or {}
    if not au:
        return []
    names = dict(THROUGHPUT)
    lines = ["", "Audit: krelay_audit (the same krelay, every request "
             "audited to a file) against krelay, same run; medians over "
             "repetitions, x = krelay_audit / krelay (paired: median of the "
             "per-repetition ratios).", "",
             "| workload | MB/s krelay / audit | x | CPU s per GiB krelay / "
             "audit | x (paired) | CPU µs per request krelay / audit | "
             "added µs (paired) | target | verdict |",
             "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for key, _ in THROUGHPUT:
        e = au.get(key)
        if e is None:
            continue
        mb = e.get("mb_per_s", {})
        cg = e.get("cpu_s_per_gib", {})
        us = e.get("cpu_us_per_request", {})
        lines.append("| %s | %s / %s | %s | %s / %s | %s (%s) | %s / %s | "
                     "%s (%s) | %s | %s |" % (
                         names.get(key, key), fmt(mb.get("krelay"), 1),
                         fmt(mb.get("krelay_audit"), 1),
                         fmtr(mb.get("ratio")), fmt(cg.get("krelay"), 2),
                         fmt(cg.get("krelay_audit"), 2),
                         fmtr(cg.get("ratio")),
                         fmtr(cg.get("paired_ratio")),
                         fmt(us.get("krelay"), 2),
                         fmt(us.get("krelay_audit"), 2),
                         fmt(us.get("added"), 2),
                         fmt(us.get("paired_added"), 2),
                         e.get("target", ""), e.get("verdict", "")))
    return lines


def meta_int(meta, key):
    """The meta key as an int; None when absent or not a number."""
    v = meta.get(key)
    return int(v) if isinstance(v, str) and v.isdigit() else None


def summarize_sasl(res):
    """The sasl section: krelay_sasl (SASL terminated, SCRAM-SHA-512
    clients) against krelay, per throughput workload (versus_krelay),
    each with issue 9's limit on krelay CPU s per GiB (the ratio of the
    medians; the paired ratio's verdict beside it), and one verdict over
    the workloads: "within" only when every one is, with at least
    SASL_MIN_RUNS repetitions of each leg."""
    runs = res["runs"]
    lim = SASL_LIMITS["cpu_s_per_gib_ratio"]
    out = {}
    for key, _ in THROUGHPUT:
        e = versus_krelay(runs, key, "krelay_sasl")
        if not e:
            continue
        cg = e.get("cpu_s_per_gib") or {}
        e["runs"] = min(len(cg.get("krelay_all") or []),
                        len(cg.get("krelay_sasl_all") or []))
        e["target"] = "CPU s per GiB at most %.2fx krelay's" % lim

        def verdict(x):
            return "no data" if x is None else "within" if x <= lim \
                else "over"
        e["verdict"] = verdict(cg.get("ratio"))
        e["paired_verdict"] = verdict(cg.get("paired_ratio"))
        out[key] = e
    vs = [e["verdict"] for e in out.values()]
    if not vs or "no data" in vs:
        overall = "no data"
    elif min(e["runs"] for e in out.values()) < SASL_MIN_RUNS:
        overall = "too few runs"
    else:
        overall = "over" if "over" in vs else "within"
    return {"limits": dict(SASL_LIMITS), "min_runs": SASL_MIN_RUNS,
            "mechanism": res["meta"].get("sasl") or "SCRAM-SHA-512",
            "logins": meta_int(res["meta"], "sasl_logins"),
            "failed_logins": meta_int(res["meta"], "sasl_failed_logins"),
            "workloads": out, "verdict": overall}


def sasl_table(res):
    sa = res.get("sasl") or {}
    if not sa.get("workloads"):
        return []
    names = dict(THROUGHPUT)
    lim = sa["limits"]["cpu_s_per_gib_ratio"]
    lines = ["", "What SASL costs: krelay_sasl (the same krelay, its "
             "listener terminating SASL, clients logged in with %s) against "
             "krelay, same run; medians over repetitions, x = krelay_sasl / "
             "krelay (paired: median of the per-repetition ratios)." % (
                 sa.get("mechanism")), "",
             "| workload | runs | MB/s krelay / SASL | x | CPU s per GiB "
             "krelay / SASL | x | x (paired) | CPU µs per request krelay / "
             "SASL | added µs (paired) | limit | verdict |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for key, _ in THROUGHPUT:
        e = sa["workloads"].get(key)
        if e is None:
            continue
        mb = e.get("mb_per_s", {})
        cg = e.get("cpu_s_per_gib", {})
        us = e.get("cpu_us_per_request", {})
        v = e.get("verdict", "")
        if e.get("paired_verdict") not in (None, v):
            v = "%s (paired: %s)" % (v, e["paired_verdict"])
        lines.append("| %s | %s | %s / %s | %s | %s / %s | %s | %s | "
                     "%s / %s | %s (%s) | at most %.2fx | %s |" % (
                         names.get(key, key), e.get("runs"),
                         fmt(mb.get("krelay"), 1),
                         fmt(mb.get("krelay_sasl"), 1),
                         fmtr(mb.get("ratio")), fmt(cg.get("krelay"), 3),
                         fmt(cg.get("krelay_sasl"), 3),
                         "–" if cg.get("ratio") is None
                         else "%.3fx" % cg["ratio"],
                         "–" if cg.get("paired_ratio") is None
                         else "%.3fx" % cg["paired_ratio"],
                         fmt(us.get("krelay"), 2),
                         fmt(us.get("krelay_sasl"), 2),
                         fmt(us.get("added"), 2),
                         fmt(us.get("paired_added"), 2), lim, v))
    lines.append("")
    logins = ""
    if sa.get("logins") is not None:
        logins = "; krelay_sasl's log: %s logins, %s failed" % (
            sa["logins"], sa.get("failed_logins") or 0)
    elif sa.get("failed_logins") is not None:
        logins = "; krelay_sasl's log: %s failed logins (successful ones " \
                 "are logged at info)" % sa["failed_logins"]
    lines.append("SASL verdict: %s (issue 9: krelay CPU s per GiB at most "
                 "%.2fx krelay's in every workload, medians of at least %d "
                 "interleaved repetitions each%s)" % (
                     sa["verdict"].upper(), lim, sa["min_runs"], logins))
    return lines


AB_LABELS = {
    "cpu_s_per_gib": "krelay CPU s per GiB",
    "mb_per_s": "MB/s",
    "p50_us": "p50, µs",
    "p99_us": "p99, µs",
    "p999_us": "p99.9, µs",
}


def ab_table(res):
    m = res["meta"]
    ab = res["ab"]
    names = dict(THROUGHPUT)
    names["latency"] = "latency (%s/s per target, interleaved)" % (
        m.get("latency_rate"))
    lines = []
    lines.append("krelay A/B benchmark: %s repetitions, A and B interleaved "
                 "(order alternating per repetition); %s" % (
                     m.get("reps"), m.get("os", "")))
    lines.append("A: %s (%s)" % (ab["a"]["label"], ab["a"]["version"]))
    lines.append("B: %s (%s)" % (ab["b"]["label"], ab["b"]["version"]))
    lines.append("Machine: %s CPUs (%s), kernel %s; mock and clients "
                 "librdkafka %s." % (m.get("ncpu"), m.get("cpu_model"),
                                     m.get("kernel"),
                                     m.get("mock_librdkafka")))
    lines.append("")
    lines.append("| case | A | B | B/A | B/A paired | limit | verdict |")
    lines.append("|---|---:|---:|---:|---:|---:|---|")
    for c in ab["cases"]:
        dg = 3 if c["metric"] == "cpu_s_per_gib" else 0
        lines.append("| %s, %s | %s | %s | %s | %s | %s | %s |" % (
            names.get(c["workload"], c["workload"]),
            AB_LABELS.get(c["metric"], c["metric"]), fmt(c["a"], dg),
            fmt(c["b"], dg),
            "–" if c["ratio"] is None else "%.3f" % c["ratio"],
            "–" if c["paired_ratio"] is None
            else "%.3f" % c["paired_ratio"],
            "" if c["limit"] is None else "±%g%%" % (100 * c["limit"]),
            c["verdict"] if c["paired_verdict"] == c["verdict"]
            else "%s (paired: %s)" % (c["verdict"], c["paired_verdict"])))
    lines.append("")
    lines.append("A/B verdict: %s (CPU s per GiB within %g%%, latency p99 "
                 "within %g%% of A, medians of at least %d repetitions "
                 "each)" % (ab["verdict"].upper(),
                            100 * ab["limits"]["cpu_s_per_gib"],
                            100 * ab["limits"]["p99_us"], ab["min_runs"]))
    pw = ["%s %s" % (c["workload"], c["metric"]) for c in ab["cases"]
          if c["limit"] is not None and c["paired_verdict"] == "worse"]
    if pw:
        lines.append("Paired B/A (per repetition) beyond the limit: %s: "
                     "the medians may hide a shift; run more "
                     "repetitions" % ", ".join(pw))
    return lines


def fmt(v, digits=0):
    if v is None:
        return "–"
    if isinstance(v, float) and abs(v) >= 1e6 and digits == 0:
        return "{:,.2f} M".format(v / 1e6)
    return "{:,.{d}f}".format(v, d=digits)


def pct(v):
    return "?" if v is None else "%.0f%%" % (100 * v)


def spread(xs):
    """'a, b, c (range R)' of per-repetition values."""
    xs = [x for x in (xs or []) if x is not None]
    if not xs:
        return "–"
    return "%s (range %.0f)" % (", ".join("%.0f" % x for x in xs),
                                max(xs) - min(xs))


def fmtr(v):
    return "–" if v is None else "{:.2f}x".format(v)


def table(res):
    m = res["meta"]
    w = res["workloads"]
    if "ab" in res:
        lines = ab_table(res)
        notes = res.get("notes") or []
        if notes:
            lines.append("")
            for n in notes:
                lines.append("- " + n)
        return "\n".join(lines)
    lines = []
    lines.append("krelay benchmark: %s runs of each workload per target, "
                 "medians; %s" % (m.get("reps"), m.get("os", "")))
    pf = m.get("cpu_proxy_fetch", m.get("cpu_proxy"))
    lines.append("Machine: %s CPUs (%s), %s MiB RAM, kernel %s. Placement "
                 "(taskset): load generator cpu %s, mock cpu %s, proxy cpu %s%s."
                 % (m.get("ncpu"), m.get("cpu_model"),
                    int(m.get("mem_total_kb", "0") or 0) // 1024,
                    m.get("kernel"), m.get("cpu_client"), m.get("cpu_mock"),
                    m.get("cpu_proxy"),
                    "" if pf == m.get("cpu_proxy")
                    else " (cpu %s for fetch)" % pf))
    lines.append("Mock and clients: librdkafka %s; HAProxy %s (mode tcp, "
                 "1 thread); krelay %s (1 worker)."
                 % (m.get("mock_librdkafka"), m.get("haproxy"),
                    m.get("krelay") or "?"))
    plain = [k for k, _ in THROUGHPUT + BLAST] + ["latency", "idle_rss"]
    if any(k in w for k in plain):
        lines.append("")
        lines.append("| workload | direct | HAProxy | krelay | "
                     "krelay/HAProxy | krelay/direct | HAProxy/direct | "
                     "saturated (CPU >= %d%%) |" % int(SATURATED * 100))
        lines.append("|---|---:|---:|---:|---:|---:|---:|---|")
    for key, label in THROUGHPUT:
        if key not in w:
            continue
        tg = w[key]["targets"]
        for metric, unit, dg in (("mb_per_s", "MB/s", 0),
                                 ("records_per_s", "records/s", 0)):
            vals = [tg.get(t, {}).get(metric) for t in TARGETS]
            sat = "; ".join("%s: %s" % (t, ",".join(tg[t]["saturated"]))
                            for t in TARGETS
                            if t in tg and tg[t]["saturated"])
            lines.append("| %s, %s | %s | %s | %s | %s | %s | %s | %s |" % (
                label, unit, fmt(vals[0], dg), fmt(vals[1], dg),
                fmt(vals[2], dg), fmtr(ratio(vals[2], vals[1])),
                fmtr(ratio(vals[2], vals[0])), fmtr(ratio(vals[1], vals[0])),
                sat if metric == "mb_per_s" else ""))
    for key, label in BLAST:
        if key not in w:
            continue
        tg = w[key]["targets"]
        for metric, unit in (("mb_per_s", "MB/s"),
                             ("requests_per_s", "requests/s")):
            vals = [tg.get(t, {}).get(metric) for t in TARGETS]
            sat = "; ".join("%s: %s" % (t, ",".join(tg[t]["saturated"]))
                            for t in TARGETS
                            if t in tg and tg[t]["saturated"])
            lines.append("| %s, %s | %s | %s | %s | %s | %s | %s | %s |" % (
                label, unit, fmt(vals[0]), fmt(vals[1]), fmt(vals[2]),
                fmtr(ratio(vals[2], vals[1])), fmtr(ratio(vals[2], vals[0])),
                fmtr(ratio(vals[1], vals[0])),
                sat if metric == "mb_per_s" else ""))
    if "latency" in w:
        lt = w["latency"]
        tg = lt["targets"]
        for p, label in (("p50_us", "p50"), ("p99_us", "p99"),
                         ("p999_us", "p99.9")):
            vals = [tg.get(t, {}).get(p) for t in TARGETS]
            how = ("%s/s per target, interleaved" % m.get("latency_rate")
                   if lt.get("method") == "interleaved"
                   else "%s/s" % m.get("latency_rate"))
            lines.append("| latency %s, µs (Produce v%s, %s) | %s | %s | "
                         "%s | | | | |" % (
                             label, m.get("latency_produce_version"), how,
                             fmt(vals[0], 0), fmt(vals[1], 0),
                             fmt(vals[2], 0)))
        for p, label in (("p50_us", "p50"), ("p99_us", "p99"),
                         ("p999_us", "p99.9")):
            h = lt["added_us"].get("haproxy", {}).get(p)
            k = lt["added_us"].get("krelay", {}).get(p)
            lines.append("| added latency %s, µs (minus direct) | | %s | %s "
                         "| %s | | | |" % (label, fmt(h, 0), fmt(k, 0),
                                           fmtr(ratio_added(k, h))))
    if "idle_rss" in w:
        tg = w["idle_rss"]["targets"]
        h = tg.get("haproxy", {}).get("bytes_per_conn")
        k = tg.get("krelay", {}).get("bytes_per_conn")
        lines.append("| RSS per idle client connection, bytes (%s conns) | "
                     "| %s | %s | %s | | | |" % (m.get("idle_conns"),
                                                fmt(h), fmt(k),
                                                fmtr(ratio(k, h))))
    for key, label in THROUGHPUT + BLAST:
        if key not in w:
            continue
        tg = w[key]["targets"]
        h = tg.get("haproxy", {}).get("cpu_s_per_gib", {}).get("haproxy")
        k = tg.get("krelay", {}).get("cpu_s_per_gib", {}).get("krelay")
        d = tg.get("direct", {}).get("cpu_s_per_gib", {}).get("mock")
        lines.append("| proxy CPU s per GiB, %s (direct: the mock's) | %s | "
                     "%s | %s | %s | | | |" % (label, fmt(d, 2), fmt(h, 2),
                                             fmt(k, 2), fmtr(ratio(k, h))))
    blines = [x for key, _ in BLAST for x in blast_lines(w, key)]
    if blines:
        lines.append("")
        lines.extend(blines)
    if "codec" in w and w["codec"]["benches"]:
        lines.append("")
        lines.append("| codec micro-benchmark (1 core) | payload bytes | "
                     "ops/s | MB/s | decode-only ops/s | memcpy MB/s | "
                     "ratio to memcpy |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|")
        for name, b in w["codec"]["benches"].items():
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                name, fmt(b["payload_bytes"]), fmt(b["ops_per_s"]),
                fmt(b["mb_per_s"]), fmt(b["decode_ops_per_s"]),
                fmt(b["memcpy_mb_per_s"]), fmtr(b["ratio_to_memcpy"])))
    if "auditline" in w and w["auditline"]["benches"]:
        al = w["auditline"]
        lines.append("")
        lines.append("| audit line micro-benchmark (1 core, a %s-byte "
                     "Produce line) | ns per line |" % fmt(al["line_bytes"]))
        lines.append("|---|---:|")
        for name, b in al["benches"].items():
            extra = ""
            if b.get("process_ns_per_op") is not None:
                extra = " (process, writer thread too: %s)" % fmt(
                    b["process_ns_per_op"], 0)
            lines.append("| %s | %s%s |" % (name, fmt(b["ns_per_op"], 0),
                                            extra))
    if "records" in w and w["records"]["benches"]:
        lines.append("")
        lines.append("| record converter (1 core, uncompressed, CRCs "
                     "checked) | value bytes | MB/s | records/s |")
        lines.append("|---|---:|---:|---:|")
        for name, b in w["records"]["benches"].items():
            lines.append("| %s | %s | %s | %s |" % (
                name, fmt(b["value_bytes"]), fmt(b["mb_per_s"]),
                fmt(b["records_per_s"], 0)))
    lines.extend(legacy_table(res))
    lines.extend(scale_table(res))
    lines.extend(audit_table(res))
    lines.extend(sasl_table(res))
    lines.extend(tls_table(res))
    notes = res.get("notes") or []
    if notes:
        lines.append("")
        for n in notes:
            lines.append("- " + n)
    return "\n".join(lines)


def notes_for(res):
    notes = []
    w = res["workloads"]
    m = res["meta"]
    for key, label in THROUGHPUT + TLS_THROUGHPUT:
        if key not in w:
            continue
        tg = w[key]["targets"]
        for t in TARGETS:
            if t not in tg:
                continue
            sat = tg[t]["saturated"]
            if "mock" in sat:
                notes.append("%s via %s: the mock is the bottleneck (it used "
                             "%.0f%% of its CPU)" % (
                                 label, t, 100 * tg[t]["cpu_util"]["mock"]))
            elif "client" in sat:
                ks = tg[t].get("client_sys_util")
                notes.append("%s via %s: the load generator is the "
                             "bottleneck (%.0f%% of its CPU%s)" % (
                                 label, t, 100 * tg[t]["cpu_util"]["client"],
                                 "" if ks is None else
                                 ", %.0f%% in its kernel" % (100 * ks)))
    for key, label in BLAST + TLS_BLAST:
        for t, v in w.get(key, {}).get("targets", {}).items():
            sat = v["saturated"]
            u = v["cpu_util"]
            q = blast_quota(m)
            if t != "direct" and t in sat and "client+canned" not in sat:
                notes.append("%s via %s: the proxy is the bottleneck (%s of "
                             "its CPU%s; the client's CPU, shared with the "
                             "scripted upstream, %s)" % (
                                 label, t, pct(u.get(t)),
                                 ", capped at %s" % pct(q) if q > 0 else "",
                                 pct((u.get("client") or 0) +
                                     (u.get("canned") or 0))))
            elif t != "direct":
                notes.append("%s via %s: NOT proxy-bound (the proxy used %s "
                             "of its CPU; saturated: %s)" % (
                                 label, t, pct(u.get(t)),
                                 ", ".join(sat) or "nothing"))
            if v.get("bad_responses"):
                notes.append("%s via %s: %d bad responses" % (
                    label, t, v["bad_responses"]))
    # Load from outside the benchmark, per workload and target (median
    # over the repetitions of the busy CPU not used by our processes).
    others = []
    disturbed = []
    for key, label in THROUGHPUT + TLS_THROUGHPUT + BLAST + TLS_BLAST + (
            ("tls_handshake", "TLS handshakes"),):
        for t, v in w.get(key, {}).get("targets", {}).items():
            o = v["cpu_util"].get("other")
            if o is not None:
                others.append(o)
                if o >= OTHER_LOAD:
                    disturbed.append("%s via %s %.0f%%" % (label, t, 100 * o))
    # With SCHED_FIFO the latency processes run first: what others used
    # meanwhile says little about the load; left out.
    lat_others = ({} if m.get("latency_priority") == "rt"
                  else w.get("latency", {}).get("targets", {}))
    for t, v in lat_others.items():
        o = v.get("other_cpu_util")
        if o is not None:
            others.append(o)
            if o >= OTHER_LOAD:
                disturbed.append("latency via %s %.0f%%" % (t, 100 * o))
    if disturbed:
        notes.append("other processes or kernel threads used a share of a "
                     "CPU during: %s (median over the repetitions): those "
                     "figures are disturbed" % "; ".join(disturbed))
    elif others:
        notes.append("the machine was otherwise quiet (other processes: at "
                     "most %.0f%% of a CPU, median over repetitions)"
                     % (100 * max(others)))
    lt = w.get("latency", {})
    late = []
    for t, v in lt.get("targets", {}).items():
        sent = v.get("sent") or (v.get("runs", 0) *
                                 int(m.get("latency_count") or 0))
        if sent and v.get("late_sends", 0) > 0.01 * sent:
            late.append("%s %.1f%%" % (t, 100.0 * v["late_sends"] / sent))
    if late:
        notes.append("latency: requests that left the client more than one "
                     "interval (1/rate of a target) late: %s (the client "
                     "was not scheduled in time: the tail is the machine's "
                     "scheduling noise as much as the path's%s)" % (
                         "; ".join(late),
                         "; interleaved, every target had the same share"
                         if lt.get("method") == "interleaved" else ""))
    if lt and m.get("latency_priority") == "rt":
        notes.append("latency: the client, the mock and the proxies ran "
                     "SCHED_FIFO during the latency workload (other load "
                     "on the machine cannot delay them)")
    if lt.get("method") == "interleaved":
        u = lt.get("cpu_util", {})
        notes.append("latency: the targets' requests interleaved in one run "
                     "per repetition (one connection each, order drawn per "
                     "round), %s/s per target, %s measured per target after "
                     "%s s of open-loop warm-up; in the window the mock used "
                     "%s, the client %s of a CPU" % (
                         m.get("latency_rate"), m.get("latency_count"),
                         m.get("latency_warmup_s", "?"),
                         pct(u.get("mock")), pct(u.get("client"))))
    for t in PROXIES:
        a = lt.get("added_us", {}).get(t, {})
        if len(a.get("p99_us_all") or []) > 1:
            notes.append("latency: added p50 / p99 / p99.9 via %s per "
                         "repetition, µs: %s / %s / %s" % (
                             t, spread(a.get("p50_us_all")),
                             spread(a.get("p99_us_all")),
                             spread(a.get("p999_us_all"))))
    hs = m.get("haproxy_sessions")
    # the counts are read after the throughput and latency workloads,
    # before idle restarts HAProxy: nothing to check without those
    if hs and any(r["workload"] in dict(THROUGHPUT) or
                  r["workload"] == "latency" for r in res["runs"]):
        counts = dict(kv.split(":", 1) for kv in hs.split(",") if ":" in kv)
        # The latency workload alone reaches broker 1 only.
        only_lat = not any(r["workload"] in dict(THROUGHPUT)
                           for r in res["runs"])
        idle = [k for k, v in counts.items() if v == "0"
                and (k == "broker1" or not only_lat)]
        if idle:
            notes.append("HAProxy leg: no session on %s: clients bypassed "
                         "HAProxy" % ", ".join(sorted(idle)))
        else:
            notes.append("HAProxy leg: every broker listener carried "
                         "sessions (%s)" % hs)
    if m.get("mock_advertises_haproxy") == "0":
        notes.append("the mock could not advertise HAProxy's ports "
                     "(librdkafka < 2.10): clients mapped them (connect_cb)")
    if "latency" in w:
        for t, v in w["latency"]["targets"].items():
            if v.get("lost"):
                notes.append("latency via %s: %d requests unanswered" %
                             (t, v["lost"]))
    seen = {r["target"] for r in res["runs"] if r["target"] in TARGETS}
    seen |= {t for _, t, _, _ in latency_legs(res["runs"])}
    for t in (AB if is_ab(res) else PLAIN):
        if seen and t not in seen and any(
                r["workload"] in dict(THROUGHPUT) or r["workload"] in
                ("latency", "idle") for r in res["runs"]):
            notes.append("%s: not measured" % t)
    tls_ran = [r for r in res["runs"] if r["workload"].startswith("tls_")]
    for t in TLS:
        if tls_ran and t not in seen:
            notes.append("%s: not measured" % t)
    hs = m.get("haproxy_tls_sessions")
    if hs and any(r["workload"] in dict(TLS_THROUGHPUT) or
                  r["workload"] == "tls_handshake" for r in res["runs"]):
        counts = dict(kv.split(":", 1) for kv in hs.split(",") if ":" in kv)
        idle = [k for k, v in counts.items() if v == "0"]
        only_hs = not any(r["workload"] in dict(TLS_THROUGHPUT)
                          for r in res["runs"])
        if idle and not only_hs:
            notes.append("haproxy_tls leg: no session on %s: clients "
                         "bypassed it" % ", ".join(sorted(idle)))
        else:
            notes.append("haproxy_tls leg: sessions per broker listener "
                         "(%s)" % hs)
    notes.extend(scale_notes(res))
    failed = [r for r in res["runs"] if r.get("rc") not in (0, None)]
    if failed:
        notes.append("%d client runs failed (not in the medians): %s" % (
            len(failed), ", ".join(sorted({"%s/%s" % (r["workload"],
                                                      r["target"])
                                           for r in failed}))))
    return notes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs")
    ap.add_argument("--out")
    ap.add_argument("--meta", action="append", default=[])
    ap.add_argument("--table", help="print the table of a results JSON")
    ap.add_argument("--rebuild", help="recompute a results JSON's "
                    "summaries and notes from its raw runs (in place, or "
                    "to --out)")
    a = ap.parse_args()
    if a.table:
        with open(a.table) as f:
            print(table(json.load(f)))
        return 0
    meta = {}
    runs = []
    if a.rebuild:
        with open(a.rebuild) as f:
            old = json.load(f)
        runs = old["runs"]
        meta = old["meta"]
        a.out = a.out or a.rebuild
    elif not a.runs or not a.out:
        ap.error("--runs and --out are required")
    else:
        with open(a.runs) as f:
            for line in f:
                line = line.strip()
                if line:
                    runs.append(json.loads(line))
    for kv in a.meta:
        k, _, v = kv.partition("=")
        meta[k] = v
    w = {}
    for key, _ in THROUGHPUT + TLS_THROUGHPUT:
        if any(r["workload"] == key for r in runs):
            w[key] = summarize_throughput(runs, key)
    for key, _ in BLAST + TLS_BLAST:
        if any(r["workload"] == key for r in runs):
            w[key] = summarize_blast(runs, key, blast_quota(meta))
    if any(r["workload"] == "blast_scale" for r in runs):
        w["blast_scale"] = summarize_scale(runs, meta)
    if any(r["workload"] == "tls_handshake" for r in runs):
        w["tls_handshake"] = summarize_handshake(runs)
    if any(r["workload"] == "tls_idle" for r in runs):
        w["tls_idle"] = summarize_idle(runs, "tls_idle", ("haproxy_tls",
                                                          "krelay_tls"))
    if any(r["workload"] == "latency" for r in runs):
        w["latency"] = summarize_latency(runs)
    if any(r["workload"] == "idle" for r in runs):
        w["idle_rss"] = summarize_idle(runs)
    if any(r["workload"] == "codec" for r in runs):
        w["codec"] = summarize_codec(runs)
    if any(r["workload"] == "auditline" for r in runs):
        w["auditline"] = summarize_auditline(runs)
    if any(r["workload"] == "records" for r in runs):
        w["records"] = summarize_records(runs)
    if any(r["workload"].startswith("legacy_") for r in runs):
        w["legacy"] = summarize_legacy(runs)
    res = {"format": "krelay-bench/1", "meta": meta, "workloads": w,
           "runs": runs}
    res["notes"] = notes_for(res)
    if any(r["target"] == "krelay_audit" for r in runs):
        res["audit"] = summarize_audit(res)
    if any(r["target"] == "krelay_sasl" for r in runs):
        res["sasl"] = summarize_sasl(res)
    if any(r["workload"].startswith("tls_") for r in runs):
        res["tls"] = summarize_tls(res)
    if is_ab(res):
        res["ab"] = summarize_ab(res)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
        f.write("\n")
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
