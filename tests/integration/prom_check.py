#!/usr/bin/python3
"""Strict checker of the Prometheus text exposition format 0.0.4 as krelay
writes it (tests/integration/admin.sh, grafana_dashboard.sh).

  prom_check.py FILE            check FILE; print "N families, M samples"
  prom_check.py --names FILE    check, then print every metric name a
                                query may use (histograms: _bucket, _sum,
                                _count), one a line

Rules (https://prometheus.io/docs/instrumenting/exposition_formats/, and
krelay's conventions on top):
  - every line is "# HELP name text", "# TYPE name type" or a sample
    "name[{label="value",...}] value"; no blank line, no other comment;
  - names match [a-zA-Z_:][a-zA-Z0-9_:]*, start with krelay_; label names
    [a-zA-Z_][a-zA-Z0-9_]* (not __*); label values escape only \\ " \\n;
  - HELP then TYPE once per family, before its samples; a family's
    samples are together; no family twice;
  - counters end in _total; histograms end in a unit (_seconds, _bytes);
    gauges and counters have samples named as the family;
  - values are integers or decimals (no NaN); counters are >= 0;
  - histogram: _bucket lines with le, ascending and cumulative
    (non-decreasing), the last le="+Inf", equal to _count; _sum and
    _count present once per label set;
  - no sample (name and labels) twice.
"""
import math
import re
import sys

NAME = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*$')
LABEL = re.compile(r'[a-zA-Z_][a-zA-Z0-9_]*$')
SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$')
VALUE = re.compile(r'-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$')
TYPES = ('counter', 'gauge', 'histogram')


class Bad(Exception):
    pass


def parse_labels(s, where):
    """'{a="x",b="y"}' -> (('a','x'), ('b','y')), strictly."""
    out = []
    i = 1
    if s == '{}':
        raise Bad('%s: empty label set {}' % where)
    while True:
        m = re.compile(r'[a-zA-Z_][a-zA-Z0-9_]*').match(s, i)
        if not m:
            raise Bad('%s: bad label name at %r' % (where, s[i:]))
        name = m.group(0)
        if name.startswith('__'):
            raise Bad('%s: reserved label name %s' % (where, name))
        i = m.end()
        if s[i:i + 2] != '="':
            raise Bad('%s: expected =" after label %s' % (where, name))
        i += 2
        val = []
        while True:
            if i >= len(s):
                raise Bad('%s: unterminated label value' % where)
            c = s[i]
            if c == '\\':
                if i + 1 >= len(s) or s[i + 1] not in '\\"n':
                    raise Bad('%s: bad escape in label value' % where)
                val.append({'n': '\n'}.get(s[i + 1], s[i + 1]))
                i += 2
                continue
            if c == '"':
                i += 1
                break
            if c == '\n':
                raise Bad('%s: raw newline in label value' % where)
            val.append(c)
            i += 1
        if name in [n for n, _ in out]:
            raise Bad('%s: label %s twice' % (where, name))
        out.append((name, ''.join(val)))
        if s[i] == ',':
            i += 1
            continue
        if s[i] == '}' and i == len(s) - 1:
            return tuple(out)
        raise Bad('%s: expected , or } at %r' % (where, s[i:]))


def check(text):
    """Return {family: type} and the sample count; raise Bad."""
    if not text.endswith('\n'):
        raise Bad('the text does not end with a newline')
    families = {}
    helps = set()
    cur = None              # the family whose samples may follow
    done = set()            # families whose samples ended
    seen = set()
    hist = {}               # (family, labels without le) -> state
    nsamples = 0
    for ln, line in enumerate(text.split('\n')[:-1], 1):
        where = 'line %d' % ln
        if line.startswith('#'):
            parts = line.split(' ', 3)
            if len(parts) < 3 or parts[0] != '#' or \
                    parts[1] not in ('HELP', 'TYPE'):
                raise Bad('%s: a comment that is not HELP or TYPE: %r'
                          % (where, line))
            name = parts[2]
            if not NAME.match(name) or not name.startswith('krelay_'):
                raise Bad('%s: bad metric name %r' % (where, name))
            if name in done or (cur is not None and name != cur and
                                name in helps):
                raise Bad('%s: family %s twice' % (where, name))
            if parts[1] == 'HELP':
                if name in helps:
                    raise Bad('%s: HELP %s twice' % (where, name))
                if len(parts) < 4 or not parts[3].strip():
                    raise Bad('%s: empty HELP for %s' % (where, name))
                if re.search(r'\\[^\\n]', parts[3]):
                    raise Bad('%s: bad escape in HELP' % where)
                if cur is not None:
                    done.add(cur)
                helps.add(name)
                cur = name
            else:
                if name != cur or name in families:
                    raise Bad('%s: TYPE %s not right after its HELP'
                              % (where, name))
                if len(parts) != 4 or parts[3] not in TYPES:
                    raise Bad('%s: bad TYPE %r' % (where, line))
                t = parts[3]
                if t == 'counter' and not name.endswith('_total'):
                    raise Bad('%s: counter %s does not end in _total'
                              % (where, name))
                if t != 'counter' and name.endswith('_total'):
                    raise Bad('%s: %s %s ends in _total' % (where, t, name))
                if t == 'histogram' and not re.search(
                        r'_(seconds|bytes)$', name):
                    raise Bad('%s: histogram %s has no unit suffix'
                              % (where, name))
                families[name] = t
            continue
        if line == '':
            raise Bad('%s: blank line' % where)
        m = SAMPLE.match(line)
        if not m:
            raise Bad('%s: not a sample: %r' % (where, line))
        sname, lbl, val = m.group(1), m.group(2), m.group(3)
        labels = parse_labels(lbl, where) if lbl else ()
        if not VALUE.match(val) and val not in ('+Inf', '-Inf'):
            raise Bad('%s: bad value %r' % (where, val))
        v = float(val)
        if math.isnan(v):
            raise Bad('%s: NaN' % where)
        if cur is None or cur not in families:
            raise Bad('%s: sample %s before any HELP/TYPE' % (where, sname))
        t = families[cur]
        if t == 'histogram':
            suffix = sname[len(cur):]
            if not sname.startswith(cur) or \
                    suffix not in ('_bucket', '_sum', '_count'):
                raise Bad('%s: %s is not a sample of histogram %s'
                          % (where, sname, cur))
            rest = tuple(x for x in labels if x[0] != 'le')
            st = hist.setdefault((cur, rest), {'le': [], 'sum': None,
                                               'count': None})
            if suffix == '_bucket':
                le = [x[1] for x in labels if x[0] == 'le']
                if len(le) != 1:
                    raise Bad('%s: bucket without le' % where)
                bound = float(le[0]) if le[0] != '+Inf' else math.inf
                if st['count'] is not None or st['sum'] is not None:
                    raise Bad('%s: bucket after _sum/_count' % where)
                if st['le'] and (bound <= st['le'][-1][0] or
                                 v < st['le'][-1][1]):
                    raise Bad('%s: buckets not ascending and cumulative'
                              % where)
                st['le'].append((bound, v))
            elif suffix == '_sum':
                if st['sum'] is not None or v < 0:
                    raise Bad('%s: bad or second _sum' % where)
                st['sum'] = v
            else:
                if st['count'] is not None:
                    raise Bad('%s: second _count' % where)
                if not st['le'] or st['le'][-1][0] != math.inf:
                    raise Bad('%s: histogram %s without le="+Inf"'
                              % (where, cur))
                if st['le'][-1][1] != v:
                    raise Bad('%s: +Inf bucket %s != _count %s'
                              % (where, st['le'][-1][1], v))
                st['count'] = v
        else:
            if sname != cur:
                raise Bad('%s: sample %s in family %s' % (where, sname, cur))
            if t == 'counter' and v < 0:
                raise Bad('%s: negative counter' % where)
            if any(x[0] == 'le' for x in labels):
                raise Bad('%s: le label outside a histogram' % where)
        key = (sname, labels)
        if key in seen:
            raise Bad('%s: sample %s%s twice' % (where, sname, lbl or ''))
        seen.add(key)
        nsamples += 1
    if cur is not None and cur not in families:
        raise Bad('family %s has HELP but no TYPE' % cur)
    for (fam, rest), st in hist.items():
        if st['count'] is None or st['sum'] is None:
            raise Bad('histogram %s%s lacks _sum or _count' % (fam, rest))
    return families, nsamples


def names(families):
    out = []
    for f, t in sorted(families.items()):
        if t == 'histogram':
            out += [f + '_bucket', f + '_sum', f + '_count']
        else:
            out.append(f)
    return out


def main():
    args = sys.argv[1:]
    want_names = args[:1] == ['--names']
    if want_names:
        args = args[1:]
    if len(args) != 1:
        sys.exit('usage: prom_check.py [--names] FILE')
    with open(args[0], encoding='utf-8') as f:
        text = f.read()
    try:
        families, n = check(text)
    except Bad as e:
        sys.exit('%s: %s' % (args[0], e))
    if want_names:
        print('\n'.join(names(families)))
    else:
        print('%d families, %d samples' % (len(families), n))


if __name__ == '__main__':
    main()
