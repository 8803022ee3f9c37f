/*
 * X500Names.java - what Java makes of certificate subjects: for each PEM
 * certificate file named on the command line, one line
 *
 *   FILE <TAB> ok <TAB> HEX(getEncoded()) <TAB> HEX(UTF-8 of getName())
 *   FILE <TAB> error <TAB> EXCEPTION
 *
 * getName() is javax.security.auth.x500.X500Principal.getName(), RFC 2253
 * as the JDK prints it: the string Kafka's DefaultKafkaPrincipalBuilder
 * builds an mTLS principal from.  The subject is taken as a TLS peer's
 * is (X509Certificate.getSubjectX500Principal()).  Both strings are
 * printed in hex so that nothing (control characters, lone surrogates
 * written as '?' by the UTF-8 encoder, as Java writes them anywhere)
 * is lost on the way.  Used by tests/tools/x500_table.py, which writes
 * tests/data/principal/x500.txt; compile with javac (JDK 11+).
 */
import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import javax.security.auth.x500.X500Principal;

public final class X500Names {
    private static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) {
            sb.append(String.format("%02x", x & 0xff));
        }
        return sb.toString();
    }

    public static void main(String[] args) throws Exception {
        CertificateFactory cf = CertificateFactory.getInstance("X.509");
        StringBuilder out = new StringBuilder();
        for (String f : args) {
            try (InputStream in = new FileInputStream(f)) {
                X509Certificate c =
                    (X509Certificate) cf.generateCertificate(in);
                X500Principal p = c.getSubjectX500Principal();
                String name = p.getName();
                out.append(f).append("\tok\t").append(hex(p.getEncoded()))
                   .append('\t')
                   .append(hex(name.getBytes(StandardCharsets.UTF_8)))
                   .append('\n');
            } catch (Exception e) {
                String m = String.valueOf(e).replaceAll("[\\t\\r\\n]", " ");
                out.append(f).append("\terror\t").append(m).append('\n');
            }
        }
        System.out.print(out);
    }
}
