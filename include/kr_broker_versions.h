/*
 * kr_broker_versions.h - what the brokers of one upstream accept (issue
 * 10): the lowest version of each ApiKey, from the ranges they advertised
 * (ApiVersions) or from a configured profile (`broker_profile`), Kafka 4
 * recognised behind its Produce range (KAFKA-18659), the versions krelay
 * translates up (the versions KIP-896 removed), and the named outcome for
 * one request version: pass, translate, refuse.
 *
 * Pure: no socket, session, libevent or config struct.  Functions prefix
 * kr_bv_.  Sources: KIP-896 and ../shared/kafka-message-schemas/README.md
 * (its "Gone in 4.3.1" column and "Remarks on the table"), KAFKA-18659
 * (a 4.x broker advertises Produce MinVersion 0 but refuses v0-2),
 * KAFKA-19444 (JoinGroup v0-1 back in 4.0.1).
 *
 * Learned ranges are arrays of struct kr_clamp (kr_translate.h) with
 * kr_api_max + 1 entries indexed by ApiKey, min > max where the broker
 * does not offer the ApiKey: kr_an_conn.broker_av, or what kr_bv_fill
 * builds from kr_upstream_api_range (krelay's own metadata connection).
 * NULL means "no ApiVersions answer seen".
 *
 * Learned and configured combine so: a profile is what the operator
 * asserts about the cluster and holds whenever it is set; learned ranges
 * refine it only where they are narrower (a higher minimum: the broker a
 * connection reached refuses more than the profile says).  Where neither
 * knows a minimum (no profile, no answer seen, an ApiKey the broker does
 * not list), krelay forwards as it always did and the broker decides.
 */
#ifndef KR_BROKER_VERSIONS_H
#define KR_BROKER_VERSIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "kr_translate.h"

/* `broker_profile` in [upstream]; the config stores it as an int. */
enum kr_broker_profile {
    KR_BROKER_PROFILE_LEARNED = 0,      /* "learned" (default): ApiVersions
                                           only */
    KR_BROKER_PROFILE_KAFKA_4_0_0,      /* "kafka-4.0.0": the 4.3.1 minima,
                                           JoinGroup 2 */
    KR_BROKER_PROFILE_KAFKA_4_0_1       /* "kafka-4.0.1+": the 4.3.1 minima
                                           (valid_4x.lo), JoinGroup 0 */
};

/* "learned", "kafka-4.0.0", "kafka-4.0.1+"; "?" for another value. */
const char *kr_broker_profile_name(int profile);

/*
 * The lowest version of api that profile asserts the brokers accept:
 * kafka-4.0.1+ the 4.3.1 tables' valid_4x.lo (Produce 3), kafka-4.0.0
 * kr_api_min_kafka4 (the same, JoinGroup 2).  -1 for "learned", an
 * unknown profile or api, or an API Kafka 4 has no version of (ApiKeys
 * 4-7).
 */
int16_t kr_bv_profile_min(int profile, int16_t api);

/*
 * Do these learned ranges come from a Kafka 4 broker?  Kafka 4 removed
 * the lowest versions of Fetch, ListOffsets, OffsetCommit, OffsetFetch,
 * CreateTopics, DeleteTopics, OffsetForLeaderEpoch, DescribeConfigs and
 * the three ACL APIs in every 4.x release (JoinGroup's came back in
 * 4.0.1; Produce's MinVersion is still advertised 0): the "signal" APIs.
 * A broker of 3.x or older advertises MinVersion 0 for each.  The rule:
 * Kafka 4 when more than half of the signal APIs the broker lists
 * advertise a MinVersion at or above Kafka 4's (kr_api_min_kafka4), and
 * it lists at least one.  A majority, not one API, so that a broker or
 * proxy that raised a single minimum for its own reasons is not taken
 * for Kafka 4 (and its Produce v0-2 refused); not all, so that a listing
 * lacking some APIs still counts.  false for NULL.
 */
bool kr_bv_is_kafka4(const struct kr_clamp *learned);

/*
 * The lowest version of api these learned ranges accept: the advertised
 * MinVersion, except Produce from a broker kr_bv_is_kafka4 recognises,
 * whose advertised minimum below 3 is taken as 3 (KAFKA-18659).  -1 when
 * learned is NULL, api is out of range or not offered (min > max).
 */
int16_t kr_bv_learned_min(const struct kr_clamp *learned, int16_t api);

/*
 * The lowest version of api the brokers of one upstream accept: the
 * higher of kr_bv_profile_min(profile, api) and kr_bv_learned_min(learned,
 * api) where both are known, else the one known, else -1 (unknown:
 * forward and let the broker decide).
 */
int16_t kr_bv_min(int profile, const struct kr_clamp *learned, int16_t api);

/*
 * The versions of api krelay translates up (the versions KIP-896
 * removed, from 3.9.1's minimum to Kafka 4's minimum - 1): Produce 0-2,
 * Fetch 0-3, ListOffsets 0, OffsetCommit 0-1, OffsetFetch 0, CreateTopics
 * 0-1, DeleteTopics 0, OffsetForLeaderEpoch 0-1, DescribeAcls, CreateAcls
 * and DeleteAcls 0, DescribeConfigs 0, JoinGroup 0-1.  true with *lo and
 * *hi; false (both untouched) for any other api.
 */
bool kr_bv_legacy_range(int16_t api, int16_t *lo, int16_t *hi);

/*
 * The same as an array of kr_api_max + 1 clamps indexed by ApiKey (min >
 * max: none), for struct kr_advert's legacy.  Built once per process
 * (thread safe), static: never freed, never NULL.
 */
const struct kr_clamp *kr_bv_legacy_ranges(void);

/* What becomes of a request of api at version v (kr_bv_decide). */
enum kr_bv_outcome {
    KR_BV_PASS = 0,         /* the brokers accept it (or nothing says they
                               do not): forward at v */
    KR_BV_TRANSLATE,        /* below their minimum, a version krelay
                               translates: send it at *to, the minimum,
                               and convert the response back to v */
    KR_BV_REFUSE_OFF,       /* below their minimum, a version krelay would
                               translate, but translate_legacy is off for
                               the listener: refuse, and say to enable it */
    KR_BV_REFUSE            /* below their minimum and not translatable */
};

/* "pass", "translate", "refuse (translate_legacy off)", "refuse". */
const char *kr_bv_outcome_name(enum kr_bv_outcome o);

/*
 * The outcome for a request of api at version v from a client of a
 * listener with translation on (translate) or off, the brokers being
 * what kr_bv_min(profile, learned, api) says:
 *   - v at or above the minimum, or the minimum unknown: PASS (versions
 *     above the broker's MaxVersion are not this module's concern: the
 *     broker answers them UNSUPPORTED_VERSION as it always did);
 *   - v in kr_bv_legacy_range(api) and the minimum exactly one above that
 *     range (translation ends where the broker starts; a broker whose
 *     minimum is higher still is refused rather than translated across a
 *     gap no release had): TRANSLATE with *to = the minimum when
 *     translate, else REFUSE_OFF;
 *   - else REFUSE.
 * *to (may be NULL) is set for TRANSLATE only.
 */
enum kr_bv_outcome kr_bv_decide(int profile, const struct kr_clamp *learned,
                                int16_t api, int16_t v, bool translate,
                                int16_t *to);

/*
 * Fill out (kr_api_max + 1 entries) from a per-ApiKey range source, such
 * as kr_upstream_api_range or kr_an_conn's broker_range: out[k] = [min,
 * max] where range(arg, k, &min, &max) is true, else empty (min 1, max
 * 0).  Returns the number of ApiKeys known; 0 means "no ApiVersions
 * answer seen" (pass NULL as learned then).
 */
unsigned kr_bv_fill(struct kr_clamp *out,
                    bool (*range)(void *arg, int16_t api, int16_t *min,
                                  int16_t *max),
                    void *arg);

#endif /* KR_BROKER_VERSIONS_H */
