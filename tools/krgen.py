#!/usr/bin/env python3
"""krgen.py - generate krelay's static Kafka schema tables.

Reads Apache Kafka's message JSON schemas (the files of
clients/src/main/resources/common/message/) for Kafka 4.3.1 and 3.9.1 and
writes src/kr_schema_gen.c (the tables declared in include/kr_schema.h),
with --ids include/kr_api_keys.h (enum kr_api_key) and with --field-ids
include/kr_field_ids.h (enum kr_field_id).

Usage:
    krgen.py --schemas DIR --out src/kr_schema_gen.c [--ids kr_api_keys.h]
             [--field-ids kr_field_ids.h]

DIR holds one folder per Kafka release (4.3.1/, 3.9.1/) and a README.md
whose table gives each folder's upstream commit.

Rules (see include/kr_schema.h):
  * every version either set defines is valid; a version 4.3.1 defines uses
    4.3.1's field tree, a version only 3.9.1 defines uses 3.9.1's;
  * API-level flexibleVersions must agree between the sets;
  * structs with identical name and fields are shared across messages and
    sets;
  * every distinct field name gets one field id (KR_FIELD_<NAME>), shared
    by every struct that has a field of that name; names that differ only
    in the case of their first letter ("timeoutMs", "TimeoutMs") are one
    name, as in Kafka's generator, which capitalises them;
  * no schema prose ("about") reaches the output.

Python 3 standard library only; the output is a pure function of the input
files (no timestamps, no dict-order dependence).
"""

import argparse
import json
import os
import re
import sys

# The newer set first: it wins where both define a version.
SETS = ("4.3.1", "3.9.1")
PRIMARY, LEGACY = SETS

V_MAX = 32767          # KR_V_MAX
NO_STRUCT = 0xFFFF     # KR_NO_STRUCT
EMPTY = (0, -1)        # an empty version range

# enum kr_type
PRIMITIVES = {
    "bool": "KR_T_BOOL",
    "int8": "KR_T_INT8",
    "int16": "KR_T_INT16",
    "uint16": "KR_T_UINT16",
    "int32": "KR_T_INT32",
    "uint32": "KR_T_UINT32",
    "int64": "KR_T_INT64",
    "float64": "KR_T_FLOAT64",
    "uuid": "KR_T_UUID",
    "string": "KR_T_STRING",
    "bytes": "KR_T_BYTES",
    "records": "KR_T_RECORDS",
}
INT_LIMITS = {
    "int8": (-2 ** 7, 2 ** 7 - 1),
    "int16": (-2 ** 15, 2 ** 15 - 1),
    "uint16": (0, 2 ** 16 - 1),
    "int32": (-2 ** 31, 2 ** 31 - 1),
    "uint32": (0, 2 ** 32 - 1),
    "int64": (-2 ** 63, 2 ** 63 - 1),
}
NULLABLE_TYPES = ("string", "bytes", "records")

# enum kr_entity
ENTITIES = {
    "topicName": "KR_E_TOPIC_NAME",
    "brokerId": "KR_E_BROKER_ID",
    "groupId": "KR_E_GROUP_ID",
    "transactionalId": "KR_E_TRANSACTIONAL_ID",
    "producerId": "KR_E_PRODUCER_ID",
}

# kr_field_desc.flags, in output order
FF = (
    ("ignorable", "KR_FF_IGNORABLE"),
    ("map_key", "KR_FF_MAP_KEY"),
    ("default_null", "KR_FF_DEFAULT_NULL"),
    ("has_default", "KR_FF_HAS_DEFAULT"),
    ("flex_override", "KR_FF_FLEX_OVERRIDE"),
    ("throttle", "KR_FF_THROTTLE"),
    ("error_code", "KR_FF_ERROR_CODE"),
    ("zero_copy", "KR_FF_ZERO_COPY"),
)

# kr_struct_desc.flags
SF_ENDPOINT, SF_HAS_TAGS, SF_HAS_TOPIC, SF_HAS_RECORDS = 1, 2, 4, 8
SF_NAMES = ((SF_ENDPOINT, "KR_SF_ENDPOINT"), (SF_HAS_TAGS, "KR_SF_HAS_TAGS"),
            (SF_HAS_TOPIC, "KR_SF_HAS_TOPIC"),
            (SF_HAS_RECORDS, "KR_SF_HAS_RECORDS"))

# kr_api_desc.flags
AF_NAMES = (("broker", "KR_AF_BROKER"), ("controller", "KR_AF_CONTROLLER"),
            ("zkBroker", "KR_AF_ZK_BROKER"), ("unstable", "KR_AF_UNSTABLE"),
            ("endpoints", "KR_AF_ENDPOINTS"))

BROKER_ID_NAMES = ("NodeId", "BrokerId", "LeaderId")

# Keys a field / a message may carry; anything else is an error, so that a
# schema bump adding a keyword is noticed.
FIELD_KEYS = {"name", "type", "versions", "about", "fields",
              "nullableVersions", "tag", "taggedVersions",
              "flexibleVersions", "default", "ignorable", "mapKey",
              "entityType", "zeroCopy"}
MESSAGE_KEYS = {"apiKey", "type", "name", "validVersions",
                "flexibleVersions", "fields", "commonStructs", "listeners",
                "latestVersionUnstable", "deprecatedVersions"}


class SchemaError(Exception):
    pass


def fail(msg):
    raise SchemaError(msg)


# ---------------------------------------------------------------------------
# Reading

def strip_comments(text):
    """Remove // comments outside JSON string literals."""
    out = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif c == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                i += 1
        elif c == "/" and i + 1 < n and text[i + 1] == "*":
            end = text.find("*/", i + 2)
            if end < 0:
                fail("unterminated /* comment")
            i = end + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def load_json(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return json.loads(strip_comments(text))
    except ValueError as e:
        fail("%s: %s" % (path, e))


def load_set(directory):
    """All message files of one release, keyed by file stem."""
    msgs = {}
    for fn in sorted(os.listdir(directory)):
        if not fn.endswith(".json"):
            continue
        m = load_json(os.path.join(directory, fn))
        m["_file"] = fn
        extra = set(m) - MESSAGE_KEYS - {"_file"}
        if extra:
            fail("%s: unknown message keys %s" % (fn, sorted(extra)))
        msgs[fn[:-5]] = m
    return msgs


def read_readme(directory):
    """{version: commit} from the README's table; {} if not found."""
    path = os.path.join(directory, "README.md")
    found = {}
    if not os.path.exists(path):
        return found
    row = re.compile(r"^\|\s*`([0-9.]+)/`\s*\|\s*([0-9.]+)\s*\|\s*"
                     r"`([0-9a-f]{7,40})`")
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = row.match(line)
            if m:
                found[m.group(1)] = (m.group(2), m.group(3))
    return found


# ---------------------------------------------------------------------------
# Value parsing

def parse_range(s, what):
    """'none' -> (0,-1); 'N+' -> (N, V_MAX); 'a-b'; 'N'."""
    if s is None:
        return EMPTY
    s = str(s).strip()
    if s == "none":
        return EMPTY
    m = re.fullmatch(r"(\d+)\+", s)
    if m:
        return (int(m.group(1)), V_MAX)
    m = re.fullmatch(r"(\d+)-(\d+)", s)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
        if lo > hi:
            fail("%s: bad range %r" % (what, s))
        return (lo, hi)
    m = re.fullmatch(r"\d+", s)
    if m:
        return (int(s), int(s))
    fail("%s: bad version range %r" % (what, s))


def parse_bool(v, what):
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip() in ("true", "false"):
        return v.strip() == "true"
    fail("%s: bad boolean %r" % (what, v))


def parse_int(v, what):
    if isinstance(v, bool):
        fail("%s: boolean where an integer is expected" % what)
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        s = v.strip()
        m = re.fullmatch(r"(-?)0[xX]([0-9a-fA-F]+)", s)
        if m:
            n = int(m.group(2), 16)
            return -n if m.group(1) else n
        if re.fullmatch(r"-?\d+", s):
            return int(s)
    fail("%s: bad integer %r" % (what, v))


def in_range(r, v):
    return r[0] <= v <= r[1]


def range_union(a, b, what):
    if a[0] > a[1]:
        return b
    if b[0] > b[1]:
        return a
    if max(a[0], b[0]) > min(a[1], b[1]) + 1:
        fail("%s: ranges %s and %s are not contiguous" % (what, a, b))
    return (min(a[0], b[0]), max(a[1], b[1]))


# ---------------------------------------------------------------------------
# Structs and fields

class Field:
    """One emitted kr_field_desc (all attributes are part of identity)."""
    __slots__ = ("name", "type", "elem", "entity", "flags", "sid", "tag",
                 "versions", "nullable", "tagged", "flexible", "def_int",
                 "def_float", "def_str", "raw_type")

    def key(self):
        return (self.name, self.type, self.elem, self.entity,
                tuple(sorted(self.flags)), self.sid, self.tag,
                self.versions, self.nullable, self.tagged, self.flexible,
                self.def_int, repr(self.def_float), self.def_str)


class Struct:
    __slots__ = ("id", "name", "fields", "flags", "ep")


class Tables:
    def __init__(self):
        self.structs = []        # Struct, by id
        self.by_key = {}         # identity -> id

    def intern(self, name, fields):
        key = (name, tuple(f.key() for f in fields))
        sid = self.by_key.get(key)
        if sid is not None:
            return sid
        s = Struct()
        s.id = len(self.structs)
        if s.id >= NO_STRUCT:
            fail("too many structs")
        s.name = name
        s.fields = fields
        s.flags = self.struct_flags(fields)
        s.ep = (-1, -1, -1)
        ep = find_endpoint(fields)
        if ep:
            s.flags |= SF_ENDPOINT
            s.ep = ep
        self.structs.append(s)
        self.by_key[key] = s.id
        return s.id

    def struct_flags(self, fields):
        flags = 0
        for f in fields:
            if f.tag >= 0:
                flags |= SF_HAS_TAGS
            if f.entity == "KR_E_TOPIC_NAME":
                flags |= SF_HAS_TOPIC
            if f.type == "KR_T_RECORDS" or f.elem == "KR_T_RECORDS":
                flags |= SF_HAS_RECORDS
            if f.sid != NO_STRUCT:
                flags |= self.structs[f.sid].flags & (SF_HAS_TOPIC |
                                                      SF_HAS_RECORDS)
        return flags

    def reaches(self, sid, flag, seen=None):
        """True when struct sid or a struct below it has flag."""
        if seen is None:
            seen = set()
        if sid in seen:
            return False
        seen.add(sid)
        s = self.structs[sid]
        if s.flags & flag:
            return True
        return any(f.sid != NO_STRUCT and self.reaches(f.sid, flag, seen)
                   for f in s.fields)


def find_endpoint(fields):
    """(node, host, port) indexes for an endpoint-shaped struct, else None."""
    node = host = port = None
    for i, f in enumerate(fields):
        if (node is None and f.type == "KR_T_INT32" and
                (f.entity == "KR_E_BROKER_ID" or f.name in BROKER_ID_NAMES)):
            node = i
        elif host is None and f.type == "KR_T_STRING" and f.name == "Host":
            host = i
        elif port is None and f.type == "KR_T_INT32" and f.name == "Port":
            port = i
    if node is None or host is None or port is None:
        return None
    if max(node, host, port) > 127:
        fail("endpoint field index does not fit int8")
    return (node, host, port)


class MessageBuilder:
    """Turns one message file's field tree into interned structs."""

    def __init__(self, tables, msg, where):
        self.t = tables
        self.where = where
        self.common = {}
        for cs in msg.get("commonStructs", []):
            if cs["name"] in self.common:
                fail("%s: duplicate commonStruct %s" % (where, cs["name"]))
            self.common[cs["name"]] = cs
        self.flex = parse_range(msg.get("flexibleVersions"),
                                where + " flexibleVersions")
        self.cache = {}

    def root(self, name, fields):
        return self.build_struct(name, fields or [], name)

    def build_struct(self, name, jfields, path):
        out = []
        seen = set()
        for jf in jfields:
            f = self.build_field(jf, path)
            # One field id per struct field: "Foo" and "foo" are one name.
            if field_key(f.name) in seen:
                fail("%s: duplicate field %s" % (path, f.name))
            seen.add(field_key(f.name))
            out.append(f)
        return self.t.intern(name, out)

    def struct_type(self, tname, jf, path):
        """Struct id for a field of struct type tname."""
        if "fields" in jf:
            return self.build_struct(tname, jf["fields"], path)
        cs = self.common.get(tname)
        if cs is None:
            fail("%s: unknown type %s" % (path, tname))
        if tname not in self.cache:
            self.cache[tname] = None        # recursion guard
            self.cache[tname] = self.build_struct(tname, cs.get("fields", []),
                                                  self.where + "." + tname)
        sid = self.cache[tname]
        if sid is None:
            fail("%s: recursive struct %s" % (path, tname))
        return sid

    def build_field(self, jf, parent):
        extra = set(jf) - FIELD_KEYS
        if extra:
            fail("%s: unknown field keys %s" % (parent, sorted(extra)))
        name = jf["name"]
        path = parent + "." + name
        t = jf["type"]
        f = Field()
        f.name = name
        f.raw_type = t
        f.elem = "KR_T_NONE"
        f.sid = NO_STRUCT
        flags = set()
        if t.startswith("[]"):
            et = t[2:]
            f.type = "KR_T_ARRAY"
            if et in PRIMITIVES:
                if "fields" in jf:
                    fail("%s: array of %s with fields" % (path, et))
                f.elem = PRIMITIVES[et]
            else:
                f.elem = "KR_T_STRUCT"
                f.sid = self.struct_type(et, jf, path)
        elif t in PRIMITIVES:
            if "fields" in jf:
                fail("%s: %s with fields" % (path, t))
            f.type = PRIMITIVES[t]
        else:
            f.type = "KR_T_STRUCT"
            f.sid = self.struct_type(t, jf, path)

        if "versions" not in jf:
            fail("%s: no versions" % path)
        f.versions = parse_range(jf["versions"], path + " versions")
        f.nullable = parse_range(jf.get("nullableVersions"),
                                 path + " nullableVersions")
        if f.nullable != EMPTY and not (
                t in NULLABLE_TYPES or f.type in ("KR_T_ARRAY",
                                                  "KR_T_STRUCT")):
            fail("%s: %s cannot be nullable" % (path, t))

        # tags
        if "tag" in jf:
            f.tag = parse_int(jf["tag"], path + " tag")
            if f.tag < 0 or f.tag > 2 ** 31 - 1:
                fail("%s: bad tag" % path)
            if "taggedVersions" not in jf:
                fail("%s: tag without taggedVersions" % path)
            f.tagged = parse_range(jf["taggedVersions"],
                                   path + " taggedVersions")
            if f.tagged == EMPTY:
                fail("%s: empty taggedVersions" % path)
        else:
            if "taggedVersions" in jf:
                fail("%s: taggedVersions without tag" % path)
            f.tag = -1
            f.tagged = EMPTY

        # field-level flexibleVersions override
        if "flexibleVersions" in jf:
            flags.add("flex_override")
            f.flexible = parse_range(jf["flexibleVersions"],
                                     path + " flexibleVersions")
        else:
            f.flexible = EMPTY

        if "ignorable" in jf and parse_bool(jf["ignorable"], path):
            flags.add("ignorable")
        if "mapKey" in jf and parse_bool(jf["mapKey"], path):
            flags.add("map_key")
        if "zeroCopy" in jf and parse_bool(jf["zeroCopy"], path):
            flags.add("zero_copy")
        if name == "ThrottleTimeMs" and t == "int32":
            flags.add("throttle")
        if name == "ErrorCode" and t == "int16":
            flags.add("error_code")

        ent = jf.get("entityType")
        if ent is None:
            f.entity = "KR_E_NONE"
        elif ent in ENTITIES:
            f.entity = ENTITIES[ent]
        else:
            fail("%s: unknown entityType %r" % (path, ent))

        self.parse_default(f, jf, t, flags, path)
        f.flags = frozenset(flags)
        return f

    @staticmethod
    def parse_default(f, jf, t, flags, path):
        f.def_int = 0
        f.def_float = 0.0
        f.def_str = ""
        if "default" not in jf:
            return
        d = jf["default"]
        flags.add("has_default")
        if isinstance(d, str) and d.strip() == "null":
            if f.nullable == EMPTY:
                fail("%s: null default on a non-nullable field" % path)
            flags.add("default_null")
            f.def_str = None
            return
        if t in INT_LIMITS:
            v = parse_int(d, path + " default")
            lo, hi = INT_LIMITS[t]
            if not lo <= v <= hi:
                fail("%s: default %r out of range for %s" % (path, d, t))
            f.def_int = v
        elif t == "bool":
            f.def_int = 1 if parse_bool(d, path + " default") else 0
        elif t == "float64":
            try:
                f.def_float = float(d)
            except (TypeError, ValueError):
                fail("%s: bad float default %r" % (path, d))
        elif t == "string":
            if not isinstance(d, str):
                fail("%s: bad string default %r" % (path, d))
            f.def_str = d
        else:
            # bytes, records, uuid, arrays, structs: only null/empty defaults
            if d != "":
                fail("%s: unsupported default %r for %s" % (path, d, t))


def fields_at(tables, sid, v):
    """The (name, type) list struct sid has at version v (for checks)."""
    return [(f.name, f.raw_type) for f in tables.structs[sid].fields
            if in_range(f.versions, v)]


# ---------------------------------------------------------------------------
# APIs

class Api:
    pass


def message_versions(m):
    if m is None:
        return EMPTY
    return parse_range(m.get("validVersions"), m["_file"] + " validVersions")


def build(schemas):
    sets = {}
    for s in SETS:
        d = os.path.join(schemas, s)
        if not os.path.isdir(d):
            fail("missing schema folder %s" % d)
        sets[s] = load_set(d)

    t = Tables()

    # Headers first: they get the lowest struct ids.
    headers = {}
    for hname in ("RequestHeader", "ResponseHeader"):
        ids = {}
        valid = EMPTY
        for s in SETS:
            m = sets[s].get(hname)
            if m is None:
                continue
            if m.get("type") != "header":
                fail("%s/%s: not a header" % (s, hname))
            # Only the primary set's header goes into the tables; the
            # others are built aside, to check they agree with it.
            tt = t if s == PRIMARY else Tables()
            b = MessageBuilder(tt, m, s + "/" + hname)
            ids[s] = (tt, b.root(hname, m.get("fields")),
                      message_versions(m))
            valid = range_union(valid, ids[s][2], hname)
        if PRIMARY not in ids:
            fail("%s missing from %s" % (hname, PRIMARY))
        _, sid, _ = ids[PRIMARY]
        # The one struct must describe the legacy-only versions as well.
        if LEGACY in ids:
            lt, lsid, lvalid = ids[LEGACY]
            for v in range(lvalid[0], lvalid[1] + 1):
                if fields_at(t, sid, v) != fields_at(lt, lsid, v):
                    fail("%s v%d differs between %s and %s" %
                         (hname, v, PRIMARY, LEGACY))
        headers[hname] = (sid, valid)

    # Group request/response files by apiKey.
    by_key = {}
    for s in SETS:
        for stem in sorted(sets[s]):
            m = sets[s][stem]
            kind = m.get("type")
            if kind == "data" or kind == "header":
                # Headers are done above.  "data" schemas (ConsumerProtocol-
                # Subscription, KRaft control records...) are not generated
                # yet; to add them, build each with
                # MessageBuilder(t, m, where).root(name, fields) like the
                # headers, keep {name: (validVersions, flexibleVersions,
                # root)} and emit a kr_data[] table in emit_c().
                continue
            if kind not in ("request", "response"):
                fail("%s/%s: unknown type %r" % (s, stem, kind))
            key = parse_int(m.get("apiKey"), stem + " apiKey")
            slot = by_key.setdefault(key, {}).setdefault(s, {})
            if kind in slot:
                fail("apiKey %d: two %s files in %s" % (key, kind, s))
            slot[kind] = m

    apis = {}
    for key in sorted(by_key):
        if key < 0 or key > 32767:
            fail("bad apiKey %d" % key)
        a = Api()
        a.key = key
        per = by_key[key]
        a.valid = EMPTY
        a.valid_4x = EMPTY
        a.flexible = None
        a.flags = set()
        a.name = None
        setvalid = {}
        for s in SETS:
            if s not in per:
                continue
            req = per[s].get("request")
            rsp = per[s].get("response")
            if req is None or rsp is None:
                fail("apiKey %d: %s lacks request or response" % (key, s))
            vr, vs = message_versions(req), message_versions(rsp)
            if vr != vs:
                fail("apiKey %d: %s request %s / response %s versions" %
                     (key, s, vr, vs))
            if a.name is None:
                if not req["name"].endswith("Request"):
                    fail("apiKey %d: odd name %s" % (key, req["name"]))
                a.name = req["name"][:-len("Request")]
            for lst in req.get("listeners", []) + rsp.get("listeners", []):
                if lst not in ("broker", "controller", "zkBroker"):
                    fail("apiKey %d: unknown listener %r" % (key, lst))
                a.flags.add(lst)
            setvalid[s] = vr
            if vr == EMPTY:
                continue
            fr = parse_range(req.get("flexibleVersions"), req["_file"])
            fs = parse_range(rsp.get("flexibleVersions"), rsp["_file"])
            if fr != fs:
                fail("apiKey %d: %s request/response flexibleVersions differ"
                     % (key, s))
            if a.flexible is None:
                a.flexible = fr
            elif a.flexible != fr:
                fail("apiKey %d: flexibleVersions %s (%s) != %s (%s)" %
                     (key, a.flexible, PRIMARY, fr, s))
            a.valid = range_union(a.valid, vr, "apiKey %d" % key)
            if s == PRIMARY:
                a.valid_4x = vr
                if parse_bool(req.get("latestVersionUnstable", False),
                              req["_file"]):
                    a.flags.add("unstable")
        if a.valid == EMPTY:
            fail("apiKey %d: no valid version in any set" % key)
        if a.flexible is None:
            a.flexible = EMPTY

        # Per-version roots.
        a.req_root = [NO_STRUCT] * (a.valid[1] + 1)
        a.rsp_root = [NO_STRUCT] * (a.valid[1] + 1)
        for s in SETS:
            vr = setvalid.get(s, EMPTY)
            todo = [v for v in range(vr[0], vr[1] + 1)
                    if a.req_root[v] == NO_STRUCT]
            if not todo:
                continue
            for kind, roots in (("request", a.req_root),
                                ("response", a.rsp_root)):
                m = per[s][kind]
                b = MessageBuilder(t, m, s + "/" + m["name"])
                if b.flex != a.flexible and todo:
                    # checked above; keep the builder honest
                    fail("apiKey %d: flexible mismatch" % key)
                sid = b.root(m["name"], m.get("fields"))
                for v in todo:
                    roots[v] = sid
        for v in range(a.valid[0], a.valid[1] + 1):
            if a.req_root[v] == NO_STRUCT or a.rsp_root[v] == NO_STRUCT:
                fail("apiKey %d v%d: no root" % (key, v))
        if any(t.reaches(sid, SF_ENDPOINT) for sid in set(a.rsp_root)
               if sid != NO_STRUCT):
            a.flags.add("endpoints")
        apis[key] = a

    return t, headers, apis


# ---------------------------------------------------------------------------
# Output

def c_str(s):
    if s is None:
        return "NULL"
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7f:
            out.append(ch)
        else:
            for byte in ch.encode("utf-8"):
                out.append("\\%03o" % byte)
    out.append('"')
    return "".join(out)


def c_range(r):
    if r == EMPTY:
        return "NV"
    return "{ %d, %s }" % (r[0], "X" if r[1] == V_MAX else str(r[1]))


def c_int64(v):
    if v == -2 ** 63:
        return "INT64_MIN"
    if -2 ** 31 <= v <= 2 ** 31 - 1:
        return str(v)
    return "INT64_C(%d)" % v


def c_double(v):
    r = repr(float(v))
    if r in ("inf", "-inf", "nan"):
        fail("non-finite float default")
    return r


def c_flags(flags, names):
    parts = [c for k, c in names if k in flags]
    return " | ".join(parts) if parts else "0"


def c_sid(sid):
    return "NS" if sid == NO_STRUCT else str(sid)


def upper_snake(name):
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", s)
    return s.upper()


def banner_text(schemas):
    info = read_readme(schemas)
    parts = []
    for s in SETS:
        ver, commit = info.get(s, (s, None))
        if commit:
            parts.append("%s (commit %s)" % (ver, commit))
        else:
            parts.append(ver)
    return ("GENERATED by tools/krgen.py from Apache Kafka %s and %s "
            "message schemas; do not edit." % (parts[0], parts[1]))


def wrap_comment(text, width=76):
    words = text.split()
    lines, cur = [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = (cur + " " + w) if cur else w
    if cur:
        lines.append(cur)
    return "/*\n" + "".join(" * %s\n" % ln for ln in lines) + " */\n"


def wrap_list(head, items, width=80):
    """head + items as a C initializer, wrapped at width columns."""
    one = "%s %s };\n" % (head, ", ".join(items))
    if len(one) <= width:
        return one
    lines, cur = [head], "   "
    for i, it in enumerate(items):
        piece = " " + it + ("," if i + 1 < len(items) else "")
        if len(cur) + len(piece) > width:
            lines.append(cur)
            cur = "   "
        cur += piece
    lines.append(cur)
    return "\n".join(lines) + "\n};\n"


def emit_c(t, headers, apis, banner):
    o = []
    w = o.append
    w(wrap_comment(banner))
    w("\n#include \"config.h\"\n\n#include <stddef.h>\n\n"
      "#include \"kr_schema.h\"\n\n")
    w("/* Shorthands for the tables below. */\n")
    w("#define NV { 0, -1 }\n#define X KR_V_MAX\n#define NS KR_NO_STRUCT\n\n")
    w("const char kr_schema_source[] =\n    %s;\n\n" % c_str(banner))

    # Field names by id
    ids = field_ids(t)
    const_of = {k: c for c, k in ids}
    w("/* Name of each field id (enum kr_field_id): the names sorted. */\n")
    w("const char *const kr_field_names[KR_NFIELD_IDS] = {\n")
    w("    [KR_FIELD_NONE] = NULL,\n")
    for c, k in ids:
        w("    [%s] = %s,\n" % (c, c_str(k)))
    w("};\n\n")

    # Fields
    w("/*\n * Columns: name, id, type, elem_type, entity, pad_, flags,"
      " struct_id, tag,\n * versions, nullable, tagged, flexible, def_int,"
      " def_float, def_str.\n */\n")
    w("const struct kr_field_desc kr_fields[] = {\n")
    first = []
    n = 0
    for s in t.structs:
        first.append(n)
        w("    /* struct %d %s */\n" % (s.id, s.name))
        for f in s.fields:
            w("    { %s, %s, %s, %s, %s, 0, %s, %s, %d, %s, %s, %s, %s, %s, "
              "%s, %s },\n" % (
                  c_str(f.name), const_of[field_key(f.name)], f.type,
                  f.elem, f.entity,
                  c_flags(f.flags, FF), c_sid(f.sid), f.tag,
                  c_range(f.versions), c_range(f.nullable),
                  c_range(f.tagged), c_range(f.flexible),
                  c_int64(f.def_int), c_double(f.def_float),
                  c_str(f.def_str)))
            n += 1
    if n == 0:
        fail("no fields at all")
    w("};\nconst uint32_t kr_nfields = %d;\n\n" % n)

    # Structs
    w("/* Columns: name, first_field, nfields, flags, ep_node, ep_host,"
      " ep_port. */\n")
    w("const struct kr_struct_desc kr_structs[] = {\n")
    for s in t.structs:
        w("    /* %d */ { %s, %d, %d, %s, %d, %d, %d },\n" % (
            s.id, c_str(s.name), first[s.id], len(s.fields),
            c_flags({k for k, _ in SF_NAMES if s.flags & k},
                    [(k, c) for k, c in SF_NAMES]),
            s.ep[0], s.ep[1], s.ep[2]))
    w("};\nconst uint32_t kr_nstructs = %d;\n\n" % len(t.structs))

    w("const uint16_t kr_request_header_struct = %d;\n" %
      headers["RequestHeader"][0])
    w("const uint16_t kr_response_header_struct = %d;\n\n" %
      headers["ResponseHeader"][0])

    # Root tables
    w("/* Root struct per version: request, then response. */\n")
    for key in sorted(apis):
        a = apis[key]
        for tag, roots in (("q", a.req_root), ("p", a.rsp_root)):
            w(wrap_list("static const uint16_t root%d%s[] = {" % (key, tag),
                        [c_sid(x) for x in roots]))
    w("\n")

    kmax = max(apis)
    w("/* Columns: key, name, valid, valid_4x, flexible, flags, req_root,"
      " rsp_root. */\n")
    w("const struct kr_api_desc kr_apis[] = {\n")
    for key in range(kmax + 1):
        a = apis.get(key)
        if a is None:
            w("    { %d, NULL, NV, NV, NV, 0, NULL, NULL },\n" % key)
            continue
        w("    { %d, %s, %s, %s, %s,\n      %s,\n      root%dq, root%dp },\n"
          % (key, c_str(a.name), c_range(a.valid), c_range(a.valid_4x),
             c_range(a.flexible), c_flags(a.flags, AF_NAMES), key, key))
    w("};\nconst int16_t kr_api_max = %d;\n\n" % kmax)
    w("#undef NV\n#undef X\n#undef NS\n")
    return "".join(o)


def field_key(name):
    """A field name as Kafka's generator sees it: first letter capitalised."""
    return name[:1].upper() + name[1:]


def field_ids(t):
    """[(constant, canonical name)] in id order (from 1), sorted by name.

    One entry per field_key() of the field names in t; fails when a name
    is not a C-friendly ASCII identifier or two names map to one
    constant.
    """
    keys = set()
    for s in t.structs:
        for f in s.fields:
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", f.name):
                fail("field name %r is not [A-Za-z][A-Za-z0-9]*" % f.name)
            keys.add(field_key(f.name))
    out, seen = [], {"KR_FIELD_NONE": None}
    for k in sorted(keys):
        const = "KR_FIELD_" + upper_snake(k)
        if const in seen:
            fail("field names %r and %r both give %s" % (seen[const], k, const))
        seen[const] = k
        out.append((const, k))
    if len(out) + 1 > NO_STRUCT:
        fail("too many field names")
    return out


def emit_field_ids(ids, banner):
    o = [wrap_comment(banner)]
    o.append("#ifndef KR_FIELD_IDS_H\n#define KR_FIELD_IDS_H\n\n")
    o.append("/*\n"
             " * Field ids: one per distinct field name of the schemas, in"
             " the order of\n"
             " * the names (kr_field_names, kr_field_id_lookup in"
             " kr_schema.h).  Names\n"
             " * that differ only in the case of their first letter share"
             " one id.  A\n"
             " * field the schemas rename or drop loses its constant here,"
             " so code that\n"
             " * uses it stops compiling.  0 is no field.\n"
             " */\n")
    o.append("enum kr_field_id {\n    KR_FIELD_NONE = 0,\n")
    for i, (const, _) in enumerate(ids):
        o.append("    %s%s\n" % (const, "," if i + 1 < len(ids) else ""))
    o.append("};\n\n/* Number of ids, KR_FIELD_NONE included. */\n")
    o.append("#define KR_NFIELD_IDS %d\n\n#endif /* KR_FIELD_IDS_H */\n"
             % (len(ids) + 1))
    return "".join(o)


def emit_ids(apis, banner):
    o = [wrap_comment(banner)]
    o.append("#ifndef KR_API_KEYS_H\n#define KR_API_KEYS_H\n\n")
    o.append("/* Kafka ApiKeys (the \"apiKey\" of each message schema). */\n")
    o.append("enum kr_api_key {\n")
    keys = sorted(apis)
    for i, key in enumerate(keys):
        o.append("    KR_API_%s = %d%s\n" % (upper_snake(apis[key].name), key,
                                           "," if i + 1 < len(keys) else ""))
    o.append("};\n\n#endif /* KR_API_KEYS_H */\n")
    return "".join(o)


def write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except OSError:
        pass
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--schemas", required=True,
                    help="folder holding 4.3.1/ and 3.9.1/")
    ap.add_argument("--out", required=True, help="generated C file")
    ap.add_argument("--ids", help="generated enum kr_api_key header")
    ap.add_argument("--field-ids", help="generated enum kr_field_id header")
    args = ap.parse_args(argv)
    try:
        t, headers, apis = build(args.schemas)
        banner = banner_text(args.schemas)
        c = emit_c(t, headers, apis, banner)
        ids = emit_ids(apis, banner) if args.ids else None
        fids = (emit_field_ids(field_ids(t), banner) if args.field_ids
                else None)
    except SchemaError as e:
        print("krgen: error: %s" % e, file=sys.stderr)
        return 1
    except (OSError, KeyError) as e:
        print("krgen: error: %r" % (e,), file=sys.stderr)
        return 1
    write_if_changed(args.out, c)
    if ids is not None:
        write_if_changed(args.ids, ids)
    if fids is not None:
        write_if_changed(args.field_ids, fids)
    return 0


if __name__ == "__main__":
    sys.exit(main())
