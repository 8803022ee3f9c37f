#!/usr/bin/python3
"""The Grafana dashboard (contrib/grafana/krelay-dashboard.json) against
what krelay exports: the file is valid JSON, has panels, and every
expression (panels' targets, template queries) names only metrics in
NAMES (one a line: prom_check.py --names of a live /metrics scrape), and
at least one of them.

  grafana_names.py DASHBOARD NAMES
"""
import json
import re
import sys

# PromQL words an identifier followed by ( or { may be that are no metric
FUNCS = {'sum', 'rate', 'irate', 'increase', 'histogram_quantile', 'by',
         'without', 'avg', 'max', 'min', 'count', 'time', 'label_values',
         'topk', 'bottomk', 'abs', 'delta', 'deriv', 'clamp_min',
         'clamp_max', 'on', 'ignoring', 'group_left', 'group_right', 'or',
         'and', 'unless', 'offset', 'changes', 'resets', 'vector', 'scalar'}


def exprs(node, out):
    """Every "expr" string and template "query" (its text) under node."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ('expr', 'definition') and isinstance(v, str):
                out.append(v)
            elif k == 'query' and isinstance(v, dict) and \
                    isinstance(v.get('query'), str):
                out.append(v['query'])
            else:
                exprs(v, out)
    elif isinstance(node, list):
        for v in node:
            exprs(v, out)
    return out


def main():
    dash, names = sys.argv[1:]
    try:
        d = json.load(open(dash, encoding='utf-8'))
    except ValueError as e:
        sys.exit('%s: not valid JSON: %s' % (dash, e))
    known = set(open(names).read().split())
    if not known:
        sys.exit('%s: no metric names' % names)
    if not d.get('panels'):
        sys.exit('%s: no panels' % dash)
    es = exprs(d, [])
    bad = []
    used = set()
    for e in es:
        # label values and names inside {...} and by (...) are not metrics
        bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', e)
        bare = re.sub(r'\{[^}]*\}', '{}', bare)
        bare = re.sub(r'\b(by|without)\s*\([^)]*\)', '', bare)
        bare = re.sub(r'\[[^\]]*\]', '[]', bare)
        # label_values(METRIC, LABEL): LABEL is a label
        bare = re.sub(r'(label_values\([^,)]*),\s*\w+\s*\)', r'\1)', bare)
        ids = re.findall(r'(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)', bare)
        metrics = [i for i in ids if i not in FUNCS]
        if not metrics:
            bad.append('%r names no metric' % e)
        for m in metrics:
            used.add(m)
            if m not in known:
                bad.append('%r: %s is not a metric krelay exports' % (e, m))
    if bad:
        sys.exit('%s:\n  %s' % (dash, '\n  '.join(bad)))
    print('%d expressions, %d metrics, all exported' % (len(es), len(used)))


if __name__ == '__main__':
    main()
