#!/usr/bin/env python3
"""x500_table.py - (re)write tests/data/principal/x500.txt with the JDK.

Reads the table, makes one certificate per record in a temporary
directory (the openssl CLI: a throw-away P-256 key, never kept), has
the JDK read them (tests/tools/X500Names.java: X500Principal.getName(),
what Kafka's default principal builder uses) and writes the table again
with each record's `der` (the subject as it is in the certificate) and
`jdk` (or `jdk!`) lines recomputed.  The inputs are kept as they are:

  subj STRING     openssl req -new -x509 -subj STRING, with `opts`:
                  utf8 (-utf8), multivalue (-multivalue-rdn), mask=M
                  (string_mask = M in the [req] section: utf8only,
                  default, pkix, nombstr, MASK:0x...)
  make LIST       the subject built here, byte for byte, as written: a
                  Python literal, a list of RDNs, each a list of
                  (TYPE, ENC, VALUE) AVAs, in that order (a SET keeps
                  the order given: not sorted as DER would).  TYPE is a
                  name of OIDS below or a dotted OID; ENC a string type
                  (utf8 printable t61 ia5 bmp univ visible numeric
                  general: VALUE a str, encoded as that type's bytes
                  are), `raw` (VALUE bytes: the string type's content
                  octets as given, e.g. malformed UTF-8, with ENC
                  raw:utf8 ...), or `tlv` (VALUE bytes: the whole
                  value's DER, any type)
  der HEX         (without subj or make) the subject's DER as given

The certificate of a `make` or `der` record is assembled here around the
subject (fixed serial, validity and issuer) and signed with openssl dgst.
A record whose certificate `openssl x509` cannot read gets a line
"openssl! cannot read the certificate" (OpenSSL refuses the subject: a
TLS client with it never gets past the handshake).

usage: x500_table.py --java-classes DIR [--check] TABLE [OUT]
  writes OUT (default: TABLE in place); --check prints a diff and exits 1
  when the table would change.
"""
import argparse
import ast
import base64
import difflib
import os
import subprocess
import sys
import tempfile

OIDS = {
    "CN": "2.5.4.3", "SN": "2.5.4.4", "serialNumber": "2.5.4.5",
    "C": "2.5.4.6", "L": "2.5.4.7", "ST": "2.5.4.8", "street": "2.5.4.9",
    "O": "2.5.4.10", "OU": "2.5.4.11", "title": "2.5.4.12",
    "GN": "2.5.4.42", "initials": "2.5.4.43",
    "generationQualifier": "2.5.4.44", "dnQualifier": "2.5.4.46",
    "pseudonym": "2.5.4.65", "emailAddress": "1.2.840.113549.1.9.1",
    "DC": "0.9.2342.19200300.100.1.25", "UID": "0.9.2342.19200300.100.1.1",
}
STRING_TAGS = {
    "utf8": 0x0C, "numeric": 0x12, "printable": 0x13, "t61": 0x14,
    "ia5": 0x16, "visible": 0x1A, "general": 0x1B, "univ": 0x1C,
    "bmp": 0x1E,
}


def der_len(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def tlv(tag, content):
    return bytes([tag]) + der_len(len(content)) + content


def oid(dotted):
    arcs = [int(x) for x in dotted.split(".")]
    out = bytearray()
    for a in [40 * arcs[0] + arcs[1]] + arcs[2:]:
        enc = [a & 0x7F]
        a >>= 7
        while a:
            enc.append(0x80 | (a & 0x7F))
            a >>= 7
        out += bytes(reversed(enc))
    return tlv(0x06, bytes(out))


def value_der(enc, value):
    if enc == "tlv":
        return bytes(value)
    if enc.startswith("raw:"):
        return tlv(STRING_TAGS[enc[4:]], bytes(value))
    tag = STRING_TAGS[enc]
    if enc == "bmp":
        data = value.encode("utf-16-be", "surrogatepass")
    elif enc == "univ":
        data = value.encode("utf-32-be", "surrogatepass")
    elif enc in ("t61",):
        data = value.encode("latin-1")
    else:
        data = value.encode("utf-8", "surrogatepass")
    return tlv(tag, data)


def make_name(rdns):
    out = b""
    for rdn in rdns:
        avas = b""
        for typ, enc, value in rdn:
            avas += tlv(0x30, oid(OIDS.get(typ, typ)) + value_der(enc, value))
        out += tlv(0x31, avas)
    return tlv(0x30, out)


def der_read(buf, off):
    """(tag, header length, content length) of the TLV at off."""
    tag = buf[off]
    n = buf[off + 1]
    if n < 0x80:
        return tag, 2, n
    k = n & 0x7F
    return tag, 2 + k, int.from_bytes(buf[off + 2:off + 2 + k], "big")


def cert_subject(cert):
    """The subject's DER, as it is in the certificate."""
    _, h, _ = der_read(cert, 0)          # Certificate
    off = h
    _, h, _ = der_read(cert, off)        # TBSCertificate
    off += h
    items = []
    while len(items) < 6:
        tag, h, n = der_read(cert, off)
        items.append(cert[off:off + h + n])
        off += h + n
    # [0] version, serial, signature, issuer, validity, subject
    return items[5] if items[0][0] == 0xA0 else items[4]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, **kw).stdout


def pem(der):
    b = base64.b64encode(der).decode()
    lines = [b[i:i + 64] for i in range(0, len(b), 64)]
    return ("-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) +
            "\n-----END CERTIFICATE-----\n")


ECDSA_SHA256 = tlv(0x30, oid("1.2.840.10045.4.3.2"))


def make_cert(tmp, key, spki, subject, path):
    """A certificate for subject (DER), signed by key."""
    issuer = make_name([[("CN", "utf8", "krelay x500 test")]])
    validity = tlv(0x30, tlv(0x17, b"250101000000Z") +
                   tlv(0x17, b"350101000000Z"))
    tbs = tlv(0x30, tlv(0xA0, tlv(0x02, b"\x02")) + tlv(0x02, b"\x01") +
              ECDSA_SHA256 + issuer + validity + subject + spki)
    tbs_path = os.path.join(tmp, "tbs.der")
    with open(tbs_path, "wb") as f:
        f.write(tbs)
    sig = run(["openssl", "dgst", "-sha256", "-sign", key, tbs_path])
    cert = tlv(0x30, tbs + ECDSA_SHA256 + tlv(0x03, b"\x00" + sig))
    with open(path, "w") as f:
        f.write(pem(cert))


def req_cert(tmp, key, subj, opts, path):
    """openssl req -x509 -subj subj with the options of the record."""
    mask = "utf8only"
    args = []
    for o in opts:
        if o == "utf8":
            args.append("-utf8")
        elif o == "multivalue":
            args.append("-multivalue-rdn")
        elif o.startswith("mask="):
            mask = o[5:]
        else:
            raise SystemExit("x500_table: unknown option %r" % o)
    cnf = os.path.join(tmp, "req.cnf")
    with open(cnf, "w") as f:
        f.write("[req]\ndistinguished_name = dn\nstring_mask = %s\n"
                "prompt = no\n[dn]\n" % mask)
    run(["openssl", "req", "-new", "-x509", "-config", cnf, "-key", key,
         "-days", "1", "-set_serial", "1", "-subj", subj, "-out", path] +
        args)
    with open(path) as f:
        body = "".join(l.strip() for l in f if not l.startswith("-----"))
    return cert_subject(base64.b64decode(body))


def text_enc(b):
    """The jdk line's text: UTF-8 as is; %XX for the bytes of control
    characters, '%' and a final white space (which editors strip)."""
    text = b.decode("utf-8")
    last = len(text) - 1 if text and text[-1].isspace() else len(text)
    out = []
    for i, ch in enumerate(text):
        if ord(ch) < 0x20 or ch in "\x7f%" or i == last:
            out.append("".join("%%%02X" % c for c in ch.encode("utf-8")))
        else:
            out.append(ch)
    return "".join(out)


def parse(table):
    """(header lines, records): a record is a list of (key, value)."""
    header, records, cur = [], [], None
    for line in table.split("\n"):
        if cur is None and (line.startswith("#") or line == "") \
                and not records:
            header.append(line)
            continue
        if line == "":
            if cur:
                records.append(cur)
            cur = None
            continue
        if cur is None:
            cur = []
        key, _, value = line.partition(" ")
        cur.append((key, value))
    if cur:
        records.append(cur)
    while header and header[-1] == "":
        header.pop()
    return header, records


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--java-classes", required=True)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("table")
    ap.add_argument("out", nargs="?")
    a = ap.parse_args()
    with open(a.table, encoding="utf-8") as f:
        old = f.read()
    header, records = parse(old)
    with tempfile.TemporaryDirectory(prefix="x500-") as tmp:
        key = os.path.join(tmp, "key.pem")
        run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt",
             "ec_paramgen_curve:P-256", "-out", key])
        spki = run(["openssl", "pkey", "-in", key, "-pubout", "-outform",
                    "DER"])
        files, ders, readable = [], [], []
        for i, rec in enumerate(records):
            d = dict(rec)
            path = os.path.join(tmp, "c%03d.pem" % i)
            if "subj" in d:
                opts = d.get("opts", "").split()
                der = req_cert(tmp, key, d["subj"], opts, path)
            else:
                if "make" in d:
                    der = make_name(ast.literal_eval(d["make"]))
                else:
                    der = bytes.fromhex(d["der"])
                make_cert(tmp, key, spki, der, path)
            files.append(path)
            ders.append(der)
            readable.append(subprocess.run(
                ["openssl", "x509", "-in", path, "-noout"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0)
        got = {}
        out = run(["java", "-cp", a.java_classes, "X500Names"] + files)
        for line in out.decode().split("\n"):
            if line:
                f, kind, rest = line.split("\t", 2)
                got[f] = (kind, rest)
    lines = list(header)
    for rec, path, der, ok in zip(records, files, ders, readable):
        lines.append("")
        for k, v in rec:
            if k not in ("der", "jdk", "jdk!", "enc", "openssl!"):
                lines.append("%s %s" % (k, v) if v else k)
        lines.append("der %s" % der.hex())
        if not ok:
            lines.append("openssl! cannot read the certificate")
        kind, rest = got[path]
        if kind == "ok":
            enc, name = rest.split("\t")
            if enc != der.hex():
                # the JDK's getEncoded() is not the certificate's bytes
                lines.append("enc %s" % enc)
            name = text_enc(bytes.fromhex(name))
            lines.append("jdk " + name if name else "jdk")
        else:
            lines.append("jdk! %s" % rest)
    new = "\n".join(lines) + "\n"
    if a.check:
        if new != old:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), new.splitlines(True),
                a.table, "regenerated"))
            return 1
        return 0
    with open(a.out or a.table, "w", encoding="utf-8") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
