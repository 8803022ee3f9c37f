/*
 * kr_sasl.h - what krelay follows of a client's SASL exchange
 * (passthrough): the mechanism a SaslHandshake named, and after a
 * SaslHandshake v0 how many raw token frames (no Kafka header, KIP-43)
 * the client still sends before Kafka requests resume.
 *
 * SaslHandshake v1+ is followed by SaslAuthenticate requests, ordinary
 * Kafka frames: nothing to count.  After v0 the tokens are raw
 * size-prefixed frames each answered by one raw frame: PLAIN is one round
 * trip (RFC 4616), SCRAM-SHA-256/512 two (RFC 5802: client-first and
 * client-final); for any other mechanism krelay cannot tell where the
 * exchange ends and the connection becomes opaque (bytes pass unparsed).
 * Termination and origination (krelay as the SASL server or client) and
 * principals build on this module.  No libevent, no session.
 */
#ifndef KR_SASL_H
#define KR_SASL_H

#include <stdbool.h>
#include <stdint.h>

struct kr_msg;

/* The mechanism of the last SaslHandshake, as far as krelay cares. */
enum kr_sasl_mech {
    KR_SASL_NONE = 0,                   /* no handshake seen */
    KR_SASL_PLAIN,                      /* one raw round trip */
    KR_SASL_SCRAM,                      /* two raw round trips */
    KR_SASL_OTHER                       /* opaque until the end */
};

/* SASL state of one client connection.  Zero-initialised: none. */
struct kr_sasl {
    enum kr_sasl_mech mech;             /* from the SaslHandshake request */
    uint32_t tokens;                    /* raw client tokens still to come */
};

/*
 * The mechanism named by len bytes at p (a SaslHandshake Mechanism):
 * PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 exactly (case matters, as in
 * Kafka), else KR_SASL_OTHER.
 */
enum kr_sasl_mech kr_sasl_mech_of(const uint8_t *p, int32_t len);

/*
 * Remember the Mechanism of a decoded SaslHandshake request m (null or
 * absent: KR_SASL_OTHER) in sa->mech and return it.  *name and *namelen
 * (both may be NULL) get the name's bytes inside m (borrowed; p may be
 * NULL when the length is 0), or NULL and -1 when it is null or absent.
 */
enum kr_sasl_mech kr_sasl_note_handshake(struct kr_sasl *sa,
                                         const struct kr_msg *m,
                                         const uint8_t **name,
                                         int32_t *namelen);

/*
 * A SaslHandshake v0 was answered with ErrorCode 0: raw tokens follow.
 * Sets sa->tokens for the mechanism and returns true; false for a
 * mechanism without a known token count (the connection is opaque from
 * now on: the caller stops parsing it).
 */
bool kr_sasl_start_raw(struct kr_sasl *sa);

#endif /* KR_SASL_H */
