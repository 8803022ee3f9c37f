#!/usr/bin/env python3
"""modgraph.py - the graph of krelay's modules: no cycle, layers kept.

A module is one .c file with its header and its private *_int.h
(src/kr_session.c, include/kr_session.h); its object is named after it,
less the per-target prefix automake may add (libkrelay_a-kr_session.o is
module kr_session).  A "module NAME PART..." rule makes the objects and
.c files PART parts of module NAME (a module of several files sharing
one *_int.h).  Two graphs:
  * link: `nm` lists each object's symbols; a symbol A uses and B defines
    is an edge A -> B.  A symbol no module defines goes to an "extern"
    pseudo-module when a rules-file regex matches it (libevent: event_*,
    evbuffer_*, ...) and is ignored otherwise (libc);
  * include (with --srcdir): a file of A includes a header of B.

Checks (exit 1 when one fails):
  * no cycle: every strongly connected component of more than one module,
    in either graph, is reported with the symbols or #include lines of
    each of its edges; one an allow-cycle line covers is a warning;
  * deny rules: FROM does not reach TO in the link graph, directly or
    through other modules (what linking FROM would pull in); a failure
    prints the path with the symbols of each step;
  * deny-include rules: FROM's .c includes no header matching a pattern,
    directly or through the project's headers; a failure prints the
    chain of #include lines.
A rule naming a module that does not exist (yet) is skipped with a note
(--strict makes that fail).  The rules are described in
tools/modgraph.rules.

Usage:
    modgraph.py [--rules FILE] [--srcdir DIR] [--strict] FILE...
    modgraph.py [--rules FILE] [--srcdir DIR] --edges FILE...
    modgraph.py [--rules FILE] [--srcdir DIR] --dot [--reduce] FILE...

--edges prints every edge with its symbols (and, with --srcdir, the
edges made by #include lines alone); --dot a graphviz graph (solid: link
edges labelled with their symbol count, dashed: include only, red: in a
cycle); --reduce leaves out the edges a longer path implies.
FILE is a static library (nm -A names its members) or an object file.
--srcdir is the top of the source tree: module M's source is
DIR/src/M.c, project headers are found in DIR/include and DIR/src.
$NM names the nm to run (default nm).  Exit codes: 0 ok, 1 a check
failed, 2 bad usage, unreadable input or rules file.

Python 3 standard library only.
"""

import argparse
import collections
import fnmatch
import os
import re
import subprocess
import sys

PROG = "modgraph"

# nm's type letters (GNU nm): undefined, and weak undefined.
UNDEF_TYPES = set("Uwv")
# Lower-case letters are local symbols except these (unique global,
# indirect function): they are defined and visible to other objects.
GLOBAL_LOWER = set("ui")

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


class Fatal(Exception):
    """Bad input: reported, exit 2."""


# ---- reading the objects ---------------------------------------------------

def module_name(member):
    """Module of an object file name: basename less extension and less
    automake's per-target prefix (everything to the last '-')."""
    base = os.path.basename(member)
    base = re.sub(r"\.(o|obj|lo)$", "", base)
    return base.rsplit("-", 1)[-1]


def archive_name(path):
    """Group of an input file: libkrcodec.a -> libkrcodec; objects given
    one by one have none."""
    base = os.path.basename(path)
    if base.endswith(".a"):
        return base[:-2]
    return None


def run_nm(path):
    """[(member, symbol, type)] of one archive or object."""
    if not os.path.isfile(path):
        raise Fatal("%s: no such file" % path)
    nm = os.environ.get("NM", "nm").split()
    try:
        out = subprocess.run(nm + ["-A", "-P", path],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             universal_newlines=True, check=False)
    except OSError as e:
        raise Fatal("cannot run %s: %s" % (" ".join(nm), e))
    if out.returncode != 0:
        raise Fatal("%s %s failed: %s" % (" ".join(nm), path,
                                          out.stderr.strip()))
    rows = []
    for line in out.stdout.splitlines():
        # POSIX form with -A: "lib.a[member.o]: name T value size" or
        # "file.o: name U".  C symbol names hold no ": ".
        prefix, sep, rest = line.rpartition(": ")
        fields = rest.split()
        if not sep or len(fields) < 2:
            continue
        m = re.match(r"^(.*)\[([^\]]+)\]$", prefix)
        member = m.group(2) if m else prefix
        rows.append((member, fields[0], fields[1]))
    return rows


class Graph:
    def __init__(self):
        self.modules = {}              # name -> archive group (or None)
        self.defined = {}              # symbol -> module
        self.undef = collections.defaultdict(set)   # module -> symbols
        self.externs = []              # [(name, [compiled regex])]
        self.edges = collections.defaultdict(set)   # (a, b) -> symbols
        self.notes = []
        self.parts = {}                # file module -> the module it is
                                       # part of ("module" rules)

    def load(self, paths):
        for path in paths:
            group = archive_name(path)
            for member, sym, typ in run_nm(path):
                mod = module_name(member)
                mod = self.parts.get(mod, mod)
                # The same module given twice (an archive and its
                # object) is one node.
                self.modules.setdefault(mod, group)
                if typ in UNDEF_TYPES:
                    self.undef[mod].add(sym)
                elif typ.isupper() or typ in GLOBAL_LOWER:
                    other = self.defined.setdefault(sym, mod)
                    if other != mod:
                        self.notes.append("%s defined by both %s and %s"
                                          % (sym, other, mod))
        if not self.modules:
            raise Fatal("no object found in %s" % " ".join(paths))
        if not self.defined:
            raise Fatal("no defined symbol in %s (stripped objects?)"
                        % " ".join(paths))

    def extern_of(self, sym):
        for name, regexes in self.externs:
            for rx in regexes:
                if rx.search(sym):
                    return name
        return None

    def build(self):
        for mod in self.modules:
            for sym in self.undef.get(mod, ()):
                to = self.defined.get(sym)
                if to is None:
                    to = self.extern_of(sym)
                if to is not None and to != mod:
                    self.edges[(mod, to)].add(sym)
        self.succ = collections.defaultdict(set)
        for a, b in self.edges:
            self.succ[a].add(b)

    def extern_names(self):
        return [n for n, _ in self.externs]

    def used_externs(self):
        used = {b for (_, b) in self.edges}
        return [n for n in self.extern_names() if n in used]


def sccs(nodes, succ):
    """Strongly connected components of more than one node (Tarjan's
    algorithm, iterative), each sorted, sorted.  Successors outside nodes
    (externs) are leaves."""
    index = {}
    low = {}
    on_stack = set()
    stack = []
    out = []
    for root in sorted(nodes):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(succ.get(root, ()))))]
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in nodes:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(succ.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on_stack.discard(x)
                        comp.append(x)
                        if x == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out)


def shortest_path(succ, src, targets):
    """Shortest path [src, ..., t] from src to one of targets, or None
    (breadth first, successors in name order)."""
    prev = {src: None}
    queue = collections.deque([src])
    while queue:
        node = queue.popleft()
        if node in targets and node != src:
            out = [node]
            while prev[out[-1]] is not None:
                out.append(prev[out[-1]])
            return out[::-1]
        for nxt in sorted(succ.get(node, ())):
            if nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    return None


# ---- the rules file --------------------------------------------------------

class Rule:
    def __init__(self, where, kind, lhs, rhs):
        self.where = where             # "FILE:LINE"
        self.kind = kind               # deny, deny-include, allow-cycle
        self.lhs = lhs
        self.rhs = rhs


def read_rules(path, graph, srcdir=None):
    """Rules of a rules file; its extern lines go into graph.  Places
    are shown relative to srcdir when the file is in it."""
    rules = []
    if path is None:
        return rules
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise Fatal("%s: %s" % (path, e.strerror))
    shown = os.path.normpath(path)
    if srcdir is not None:
        rel = os.path.relpath(path, srcdir)
        if not rel.startswith(".."):
            shown = rel
    for no, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = "%s:%d" % (shown, no)
        words = line.split()
        kind, args = words[0], words[1:]
        if kind == "extern":
            if len(args) < 2:
                raise Fatal("%s: extern NAME REGEX..." % where)
            try:
                rxs = [re.compile(a) for a in args[1:]]
            except re.error as e:
                raise Fatal("%s: bad regex: %s" % (where, e))
            for name, have in graph.externs:
                if name == args[0]:
                    have += rxs
                    break
            else:
                graph.externs.append((args[0], rxs))
        elif kind in ("deny", "deny-include"):
            if "->" not in args:
                raise Fatal("%s: %s FROM... -> TO..." % (where, kind))
            i = args.index("->")
            lhs, rhs = args[:i], args[i + 1:]
            if not lhs or not rhs:
                raise Fatal("%s: %s FROM... -> TO..." % (where, kind))
            rules.append(Rule(where, kind, lhs, rhs))
        elif kind == "module":
            if len(args) < 2:
                raise Fatal("%s: module NAME PART..." % where)
            for part in args[1:]:
                graph.parts[part] = args[0]
        elif kind == "allow-cycle":
            if len(args) < 2:
                raise Fatal("%s: allow-cycle MODULE MODULE..." % where)
            rules.append(Rule(where, kind, args, []))
        else:
            raise Fatal("%s: unknown rule '%s' (extern, module, deny, "
                        "deny-include, allow-cycle)" % (where, kind))
    return rules


def expand(graph, pattern, with_externs):
    """Modules (and externs) a rule pattern names: a glob over module
    names (and extern names), or @NAME for every module of the archive
    NAME.a (@libkrcodec)."""
    if pattern.startswith("@"):
        return sorted(m for m, g in graph.modules.items()
                      if g == pattern[1:])
    names = list(graph.modules)
    if with_externs:
        names += graph.extern_names()
    return sorted(n for n in names if fnmatch.fnmatchcase(n, pattern))


# ---- includes --------------------------------------------------------------

def header_module(path):
    """Module a project header belongs to: kr_session.h and its private
    kr_session_int.h are kr_session's."""
    base = re.sub(r"\.h$", "", os.path.basename(path))
    return re.sub(r"_int$", "", base)


class Includes:
    """#include lines of the project's sources.  A header is the
    project's when it is found in DIR/include, DIR/src or the including
    file's folder; others (libevent's, libc's) are leaves."""

    def __init__(self, srcdir, parts=None):
        self.srcdir = srcdir
        self.cache = {}
        self.parts = parts or {}        # file module -> module

    def source(self, module):
        path = os.path.join(self.srcdir, "src", module + ".c")
        return path if os.path.isfile(path) else None

    def files(self, module):
        """The files of a module: its .c, its header, its *_int.h, and
        the .c of its parts ("module" rules)."""
        out = []
        names = [("src", module + ".c"), ("include", module + ".h"),
                 ("src", module + ".h"), ("include", module + "_int.h"),
                 ("src", module + "_int.h")]
        names += [("src", p + ".c") for p, m in sorted(self.parts.items())
                  if m == module]
        for d, name in names:
            p = os.path.join(self.srcdir, d, name)
            if os.path.isfile(p):
                out.append(p)
        return out

    def headers(self):
        """Every project header."""
        out = []
        for d in ("include", "src"):
            top = os.path.join(self.srcdir, d)
            if os.path.isdir(top):
                out += [os.path.join(top, f) for f in sorted(os.listdir(top))
                        if f.endswith(".h")]
        return out

    def lines(self, path):
        """[(line number, included name)] of one file."""
        if path not in self.cache:
            out = []
            with open(path, encoding="utf-8", errors="replace") as f:
                for no, line in enumerate(f, 1):
                    m = INCLUDE_RE.match(line)
                    if m:
                        out.append((no, m.group(2)))
            self.cache[path] = out
        return self.cache[path]

    def resolve(self, name, including):
        for d in (os.path.dirname(including),
                  os.path.join(self.srcdir, "include"),
                  os.path.join(self.srcdir, "src")):
            p = os.path.normpath(os.path.join(d, name))
            if os.path.isfile(p):
                return p
        return None

    def rel(self, path):
        return os.path.relpath(path, self.srcdir)

    def graph(self, modules):
        """Module -> module edges of the includes: a file of A includes a
        header of B.  modules: those of the objects; headers without an
        object (kr_api_keys.h) are modules of their own.  Returns
        (nodes, {(a, b): ["file:line", ...]})."""
        nodes = set(modules)
        nodes.update(header_module(h) for h in self.headers())
        edges = collections.defaultdict(list)
        for mod in sorted(nodes):
            for path in self.files(mod):
                for no, name in self.lines(path):
                    sub = self.resolve(name, path)
                    if sub is None:
                        continue
                    to = header_module(sub)
                    if to != mod and to in nodes:
                        edges[(mod, to)].append("%s:%d" % (self.rel(path),
                                                           no))
        return nodes, edges

    def find(self, start, patterns):
        """[(chain, name)] for each distinct header matching a pattern
        that start includes, directly or through project headers; chain
        is [(file, line, included name)]."""
        hits = []
        seen = {start}
        matched = set()
        todo = collections.deque([(start, [])])
        while todo:
            path, chain = todo.popleft()
            for no, name in self.lines(path):
                step = chain + [(path, no, name)]
                base = os.path.basename(name)
                if name not in matched and any(
                        fnmatch.fnmatchcase(name, pat)
                        or fnmatch.fnmatchcase(base, pat)
                        for pat in patterns):
                    matched.add(name)
                    hits.append((step, name))
                sub = self.resolve(name, path)
                if sub and sub not in seen:
                    seen.add(sub)
                    todo.append((sub, step))
        return hits

    def show(self, chain):
        return ", ".join("%s:%d includes %s" % (self.rel(path), no, name)
                         for path, no, name in chain)


# ---- checks ----------------------------------------------------------------

class Report:
    def __init__(self):
        self.failures = 0
        self.warnings = 0
        self.skipped = 0
        self.checked = 0

    def fail(self, msg):
        self.failures += 1
        print("%s: FAIL: %s" % (PROG, msg))

    def warn(self, msg):
        self.warnings += 1
        print("%s: warning: %s" % (PROG, msg))

    def note(self, msg):
        print("%s: note: %s" % (PROG, msg))


def edge_text(graph, a, b, indent="    "):
    syms = sorted(graph.edges[(a, b)])
    return "%s%s -> %s (%d): %s" % (indent, a, b, len(syms),
                                     " ".join(syms))


def inc_edge_text(inc_edges, a, b, indent="    "):
    return "%s%s -> %s: %s" % (indent, a, b, " ".join(inc_edges[(a, b)]))


def check_cycles(graph, inc_graph, rules, rep):
    """Cycles of the link graph and of the include graph; an allow-cycle
    line covers a cycle of either whose modules it all lists."""
    allows = [r for r in rules if r.kind == "allow-cycle"]
    covered = collections.defaultdict(set)
    kinds = [("link", set(graph.modules), graph.succ,
              lambda a, b: edge_text(graph, a, b)
              if (a, b) in graph.edges else None)]
    if inc_graph is not None:
        nodes, inc_edges = inc_graph
        succ = collections.defaultdict(set)
        for a, b in inc_edges:
            succ[a].add(b)
        kinds.append(("include", nodes, succ,
                      lambda a, b: inc_edge_text(inc_edges, a, b)
                      if (a, b) in inc_edges else None))
    failed = []
    for kind, nodes, succ, text in kinds:
        for comp in sccs(nodes, succ):
            allow = None
            for r in allows:
                if set(comp) <= set(r.lhs):
                    allow = r
                    break
            if allow is not None:
                covered[id(allow)].update(comp)
                rep.warn("%s cycle between %s, allowed by %s (break it, "
                         "then remove the line)"
                         % (kind, " ".join(comp), allow.where))
            else:
                failed.append((kind, comp))
                rep.fail("%s cycle between %s" % (kind, " ".join(comp)))
            for a in comp:
                for b in comp:
                    line = text(a, b)
                    if line:
                        print(line)
    for r in allows:
        left = sorted(set(r.lhs) - covered[id(r)])
        bigger = [(k, c) for k, c in failed
                  if len(set(c) & set(r.lhs)) > 1]
        for kind, comp in bigger:
            rep.note("%s: allow-cycle %s: now part of the larger %s cycle "
                     "%s above" % (r.where, " ".join(r.lhs), kind,
                                   " ".join(comp)))
        if bigger:
            continue
        if not covered[id(r)]:
            rep.note("%s: allow-cycle %s: no such cycle any more, remove "
                     "the line" % (r.where, " ".join(r.lhs)))
        elif left:
            rep.note("%s: %s in no cycle any more: shorten the line"
                     % (r.where, " ".join(left)))


def from_modules(graph, r, rep, exists):
    """FROM modules a rule names; notes the patterns naming none."""
    out = []
    for pat in r.lhs:
        found = expand(graph, pat, False)
        if not found and not any(c in pat for c in "*?[@") and exists(pat):
            found = [pat]
        if not found:
            rep.skipped += 1
            rep.note("%s: skipped for %s: no such module (yet)"
                     % (r.where, pat))
        out += [m for m in found if m not in out]
    return out


def check_deny(graph, r, rep):
    froms = from_modules(graph, r, rep, lambda m: False)
    if not froms:
        return
    targets = set()
    for pat in r.rhs:
        found = expand(graph, pat, True)
        if not found:
            rep.skipped += 1
            rep.note("%s: skipped for %s: no such module or extern (yet)"
                     % (r.where, pat))
        targets.update(found)
    for mod in froms:
        rep.checked += 1
        # One failure per target reached, each with its shortest path.
        for t in sorted(targets - {mod}):
            p = shortest_path(graph.succ, mod, {t})
            if p is None:
                continue
            rep.fail("%s: %s must not depend on %s: %s"
                     % (r.where, mod, t, " -> ".join(p)))
            for a, b in zip(p, p[1:]):
                print(edge_text(graph, a, b))


def check_include(graph, inc, r, rep):
    if inc is None:
        rep.skipped += 1
        rep.note("%s: skipped: include rules need --srcdir" % r.where)
        return
    froms = from_modules(graph, r, rep, lambda m: inc.source(m) is not None)
    for mod in froms:
        src = inc.source(mod)
        if src is None:
            rep.skipped += 1
            rep.note("%s: skipped for %s: no src/%s.c"
                     % (r.where, mod, mod))
            continue
        rep.checked += 1
        for chain, name in inc.find(src, r.rhs):
            rep.fail("%s: %s.c must not include %s: %s"
                     % (r.where, mod, name, inc.show(chain)))


# ---- output forms ----------------------------------------------------------

def print_edges(graph, inc_graph):
    for (a, b) in sorted(graph.edges):
        print(edge_text(graph, a, b, indent=""))
    if inc_graph is not None:
        _, inc_edges = inc_graph
        for (a, b) in sorted(inc_edges):
            if (a, b) not in graph.edges:
                print("%s -> %s (includes only): %s"
                      % (a, b, " ".join(inc_edges[(a, b)])))


def dot_id(name):
    return '"%s"' % name.replace('"', '\\"')


def reduced(edges):
    """The edges less those a longer path implies (a -> c goes when
    a -> b -> ... -> c exists): the same reachability, fewer lines.
    Edges inside a cycle are all kept; between cycles the reduction is
    that of the graph of cycles (each cycle one node)."""
    nodes = {x for e in edges for x in e}
    succ = collections.defaultdict(set)
    for a, b in edges:
        succ[a].add(b)
    comp_of = {n: n for n in nodes}
    for comp in sccs(nodes, succ):
        for n in comp:
            comp_of[n] = comp[0]
    csucc = collections.defaultdict(set)
    for a, b in edges:
        if comp_of[a] != comp_of[b]:
            csucc[comp_of[a]].add(comp_of[b])

    def implied(ca, cb):
        """cb reachable from ca other than by the edge ca -> cb."""
        seen = {ca}
        todo = [n for n in csucc[ca] if n != cb]
        while todo:
            n = todo.pop()
            if n == cb:
                return True
            if n not in seen:
                seen.add(n)
                todo += csucc[n]
        return False

    return {(a, b) for a, b in edges
            if comp_of[a] == comp_of[b]
            or not implied(comp_of[a], comp_of[b])}


def print_dot(graph, inc_graph, reduce_edges):
    def cycle_edges(succ, nodes):
        out = set()
        for comp in sccs(nodes, succ):
            out.update((a, b) for a in comp for b in comp
                       if b in succ.get(a, ()))
        return out

    red = cycle_edges(graph.succ, set(graph.modules))
    inc_only = {}
    if inc_graph is not None:
        nodes, inc_edges = inc_graph
        succ = collections.defaultdict(set)
        for a, b in inc_edges:
            succ[a].add(b)
        red |= cycle_edges(succ, nodes)
        inc_only = {e: v for e, v in inc_edges.items()
                    if e not in graph.edges and e[0] in graph.modules
                    and e[1] in graph.modules}
    print("// tools/modgraph.py --dot: krelay's modules.  A solid edge is a")
    print("// link dependency labelled with the number of symbols used; a")
    print("// dashed one an #include without a symbol; red: in a cycle.")
    if reduce_edges:
        print("// --reduce: an edge a longer path implies is not drawn.")
    print("digraph modules {")
    print("    rankdir=LR;")
    print("    node [shape=box, fontname=\"monospace\", fontsize=10];")
    print("    edge [fontsize=8];")
    groups = collections.defaultdict(list)
    for m, g in graph.modules.items():
        groups[g].append(m)
    for g in sorted(groups, key=lambda x: x or ""):
        indent = "    "
        if g:
            print("    subgraph %s {" % dot_id("cluster_" + g))
            print("        label=%s;" % dot_id(g + ".a"))
            indent = "        "
        for m in sorted(groups[g]):
            print("%s%s;" % (indent, dot_id(m)))
        if g:
            print("    }")
    for e in graph.used_externs():
        print("    %s [shape=ellipse, style=dashed];" % dot_id(e))
    lines = []
    drawn = set(graph.edges) | set(inc_only)
    if reduce_edges:
        drawn = reduced(drawn)
    for (a, b) in graph.edges:
        if (a, b) in drawn:
            lines.append((a, b, ["label=%d" % len(graph.edges[(a, b)])]))
    for (a, b) in inc_only:
        if (a, b) in drawn:
            lines.append((a, b, ["style=dashed"]))
    for a, b, attrs in sorted(lines):
        if (a, b) in red:
            attrs += ["color=red", "fontcolor=red"]
        print("    %s -> %s [%s];" % (dot_id(a), dot_id(b), ", ".join(attrs)))
    print("}")


# ---- main ------------------------------------------------------------------

def main(argv):
    ap = argparse.ArgumentParser(
        prog="modgraph.py",
        description="Module graph from object symbols: cycles, layer rules.")
    ap.add_argument("files", nargs="+", metavar="FILE",
                    help="static libraries (.a) or objects (.o)")
    ap.add_argument("--rules", metavar="FILE",
                    help="rules file (tools/modgraph.rules)")
    ap.add_argument("--srcdir", metavar="DIR",
                    help="top of the source tree, for include rules")
    ap.add_argument("--strict", action="store_true",
                    help="a rule naming a missing module fails")
    out = ap.add_mutually_exclusive_group()
    out.add_argument("--edges", action="store_true",
                     help="print the edges with their symbols, no checks")
    out.add_argument("--dot", action="store_true",
                     help="print a graphviz graph, no checks")
    ap.add_argument("--reduce", action="store_true",
                    help="with --dot: leave out the edges a longer path "
                    "implies (transitive reduction)")
    args = ap.parse_args(argv)

    graph = Graph()
    try:
        rules = read_rules(args.rules, graph, args.srcdir)
        graph.load(args.files)
    except Fatal as e:
        print("%s: error: %s" % (PROG, e), file=sys.stderr)
        return 2
    graph.build()

    inc = inc_graph = None
    if args.srcdir:
        if not os.path.isdir(os.path.join(args.srcdir, "src")):
            print("%s: error: %s: no src/ folder" % (PROG, args.srcdir),
                  file=sys.stderr)
            return 2
        inc = Includes(args.srcdir, graph.parts)
        inc_graph = inc.graph(graph.modules)

    if args.edges:
        print_edges(graph, inc_graph)
        return 0
    if args.dot:
        print_dot(graph, inc_graph, args.reduce)
        return 0

    rep = Report()
    for n in graph.notes:
        rep.note(n)
    if inc is None:
        rep.note("no --srcdir: include cycles and include rules not checked")
    else:
        for mod, group in sorted(graph.modules.items()):
            if inc.source(mod) is None:
                rep.note("%s: no src/%s.c: a stale member of %s? "
                         "(rebuild the archive)" % (mod, mod,
                                                    group or "the input"))
    groups = collections.Counter(g for g in graph.modules.values() if g)
    print("%s: %d modules (%s), %d link edges, %s include edges; "
          "externs used: %s"
          % (PROG, len(graph.modules),
             ", ".join("%s %d" % (g, n) for g, n in sorted(groups.items()))
             or "objects", len(graph.edges),
             len(inc_graph[1]) if inc_graph else "no",
             " ".join(graph.used_externs()) or "none"))
    check_cycles(graph, inc_graph, rules, rep)
    for r in rules:
        if r.kind == "deny":
            check_deny(graph, r, rep)
        elif r.kind == "deny-include":
            check_include(graph, inc, r, rep)

    verdict = "ok"
    if rep.failures or (args.strict and rep.skipped):
        verdict = "FAILED"
    print("%s: %d failure(s), %d warning(s), %d module check(s), "
          "%d skipped: %s" % (PROG, rep.failures, rep.warnings, rep.checked,
                              rep.skipped, verdict))
    return 0 if verdict == "ok" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
