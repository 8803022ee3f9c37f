/*
 * MappingRules.java - what Kafka's ssl.principal.mapping.rules make of a
 * name, computed with the JDK's own java.util.regex.  One record a line
 * on standard input, fields in hex (UTF-8) separated by spaces:
 *
 *   HEX(pattern) HEX(replacement) CASE HEX(name)     (CASE: - L U)
 *
 * and one line out for each:
 *
 *   ok HEX(result)            the rule applies: its result
 *   nomatch                   the pattern does not match the whole name
 *   pattern-error MESSAGE     Pattern.compile refuses the pattern
 *   replacement-error MESSAGE the replacement throws when the rule
 *                             applies
 *
 * A rule RULE:pattern/replacement/CASE applies, as Kafka's
 * SslPrincipalMapper applies it (KIP-371), when the pattern matches the
 * whole name (matches()); its result is name.replaceAll(pattern,
 * replacement'), lower- or upper-cased (Locale.ENGLISH) with L or U,
 * where replacement' is the replacement with each "$N" naming a group
 * the pattern does not have turned into a literal "\$N" (when the
 * pattern has groups; N shortened from the right while above the count
 * and >= 10; "$0..." left alone), each "\" inserted at the index the
 * "$N" has in the original replacement, as Kafka's rewriting does.
 * Used by tests/tools/mapping_table.py (tests/data/principal/mapping.txt).
 */
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

public final class MappingRules {
    private static final Pattern BACK_REFERENCE = Pattern.compile("\\$(\\d+)");

    private static String unhex(String h) {
        byte[] b = new byte[h.length() / 2];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        }
        return new String(b, StandardCharsets.UTF_8);
    }

    private static String hex(String s) {
        StringBuilder sb = new StringBuilder();
        for (byte x : s.getBytes(StandardCharsets.UTF_8)) {
            sb.append(String.format("%02x", x & 0xff));
        }
        return sb.toString();
    }

    /* "$N" past the group count made literal, as Kafka does. */
    private static String escapeBackReferences(String s, int groups) {
        if (groups == 0) {
            return s;
        }
        String value = s;
        Matcher m = BACK_REFERENCE.matcher(s);
        while (m.find()) {
            String num = m.group(1);
            if (num.startsWith("0")) {
                continue;
            }
            int n = Integer.parseInt(num);
            while (n > groups && n >= 10) {
                n /= 10;
            }
            if (n > groups) {
                int at = m.start(1) - 1;
                value = value.substring(0, at) + "\\" + value.substring(at);
            }
        }
        return value;
    }

    private static String apply(String pattern, String repl, String cs,
                                String name) {
        Pattern p;
        try {
            p = Pattern.compile(pattern);
        } catch (PatternSyntaxException e) {
            return "pattern-error " + e.getDescription();
        }
        Matcher m = p.matcher(name);
        if (!m.matches()) {
            return "nomatch";
        }
        String result;
        try {
            result = name.replaceAll(p.pattern(),
                                     escapeBackReferences(repl,
                                                          m.groupCount()));
        } catch (RuntimeException e) {
            return "replacement-error " +
                   e.getClass().getSimpleName() + ": " + e.getMessage();
        }
        if (cs.equals("L")) {
            result = result.toLowerCase(Locale.ENGLISH);
        } else if (cs.equals("U")) {
            result = result.toUpperCase(Locale.ENGLISH);
        }
        return "ok " + hex(result);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(
            new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ", -1);
            String r = apply(unhex(f[0]), unhex(f[1]), f[2], unhex(f[3]));
            out.append(r.replaceAll("[\\r\\n]", " ")).append('\n');
        }
        System.out.print(out);
    }
}
