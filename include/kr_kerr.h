/*
 * kr_kerr.h - names of Kafka's protocol error codes (ErrorCode fields).
 *
 * Source: org.apache.kafka.common.protocol.Errors (Errors.java), codes -1
 * (UNKNOWN_SERVER_ERROR) and 0 (NONE) through KR_KERR_MAX, as of Apache
 * Kafka 4.1.  The names are Kafka's own, so they match broker logs and
 * https://kafka.apache.org/protocol#protocol_error_codes.  These codes are
 * not enum kr_status values (kr_common.h): they are data on the wire.
 *
 * No allocation; every function is thread-safe.
 */
#ifndef KR_KERR_H
#define KR_KERR_H

#include <stddef.h>
#include <stdint.h>

/*
 * Every code with Kafka's name, in code order: the one list the enum
 * below and the name table (kr_kerr.c) are made from.
 */
#define KR_KERR_LIST(X) \
    X(-1, UNKNOWN_SERVER_ERROR) \
    X(0, NONE) \
    X(1, OFFSET_OUT_OF_RANGE) \
    X(2, CORRUPT_MESSAGE) \
    X(3, UNKNOWN_TOPIC_OR_PARTITION) \
    X(4, INVALID_FETCH_SIZE) \
    X(5, LEADER_NOT_AVAILABLE) \
    X(6, NOT_LEADER_OR_FOLLOWER) \
    X(7, REQUEST_TIMED_OUT) \
    X(8, BROKER_NOT_AVAILABLE) \
    X(9, REPLICA_NOT_AVAILABLE) \
    X(10, MESSAGE_TOO_LARGE) \
    X(11, STALE_CONTROLLER_EPOCH) \
    X(12, OFFSET_METADATA_TOO_LARGE) \
    X(13, NETWORK_EXCEPTION) \
    X(14, COORDINATOR_LOAD_IN_PROGRESS) \
    X(15, COORDINATOR_NOT_AVAILABLE) \
    X(16, NOT_COORDINATOR) \
    X(17, INVALID_TOPIC_EXCEPTION) \
    X(18, RECORD_LIST_TOO_LARGE) \
    X(19, NOT_ENOUGH_REPLICAS) \
    X(20, NOT_ENOUGH_REPLICAS_AFTER_APPEND) \
    X(21, INVALID_REQUIRED_ACKS) \
    X(22, ILLEGAL_GENERATION) \
    X(23, INCONSISTENT_GROUP_PROTOCOL) \
    X(24, INVALID_GROUP_ID) \
    X(25, UNKNOWN_MEMBER_ID) \
    X(26, INVALID_SESSION_TIMEOUT) \
    X(27, REBALANCE_IN_PROGRESS) \
    X(28, INVALID_COMMIT_OFFSET_SIZE) \
    X(29, TOPIC_AUTHORIZATION_FAILED) \
    X(30, GROUP_AUTHORIZATION_FAILED) \
    X(31, CLUSTER_AUTHORIZATION_FAILED) \
    X(32, INVALID_TIMESTAMP) \
    X(33, UNSUPPORTED_SASL_MECHANISM) \
    X(34, ILLEGAL_SASL_STATE) \
    X(35, UNSUPPORTED_VERSION) \
    X(36, TOPIC_ALREADY_EXISTS) \
    X(37, INVALID_PARTITIONS) \
    X(38, INVALID_REPLICATION_FACTOR) \
    X(39, INVALID_REPLICA_ASSIGNMENT) \
    X(40, INVALID_CONFIG) \
    X(41, NOT_CONTROLLER) \
    X(42, INVALID_REQUEST) \
    X(43, UNSUPPORTED_FOR_MESSAGE_FORMAT) \
    X(44, POLICY_VIOLATION) \
    X(45, OUT_OF_ORDER_SEQUENCE_NUMBER) \
    X(46, DUPLICATE_SEQUENCE_NUMBER) \
    X(47, INVALID_PRODUCER_EPOCH) \
    X(48, INVALID_TXN_STATE) \
    X(49, INVALID_PRODUCER_ID_MAPPING) \
    X(50, INVALID_TRANSACTION_TIMEOUT) \
    X(51, CONCURRENT_TRANSACTIONS) \
    X(52, TRANSACTION_COORDINATOR_FENCED) \
    X(53, TRANSACTIONAL_ID_AUTHORIZATION_FAILED) \
    X(54, SECURITY_DISABLED) \
    X(55, OPERATION_NOT_ATTEMPTED) \
    X(56, KAFKA_STORAGE_ERROR) \
    X(57, LOG_DIR_NOT_FOUND) \
    X(58, SASL_AUTHENTICATION_FAILED) \
    X(59, UNKNOWN_PRODUCER_ID) \
    X(60, REASSIGNMENT_IN_PROGRESS) \
    X(61, DELEGATION_TOKEN_AUTH_DISABLED) \
    X(62, DELEGATION_TOKEN_NOT_FOUND) \
    X(63, DELEGATION_TOKEN_OWNER_MISMATCH) \
    X(64, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED) \
    X(65, DELEGATION_TOKEN_AUTHORIZATION_FAILED) \
    X(66, DELEGATION_TOKEN_EXPIRED) \
    X(67, INVALID_PRINCIPAL_TYPE) \
    X(68, NON_EMPTY_GROUP) \
    X(69, GROUP_ID_NOT_FOUND) \
    X(70, FETCH_SESSION_ID_NOT_FOUND) \
    X(71, INVALID_FETCH_SESSION_EPOCH) \
    X(72, LISTENER_NOT_FOUND) \
    X(73, TOPIC_DELETION_DISABLED) \
    X(74, FENCED_LEADER_EPOCH) \
    X(75, UNKNOWN_LEADER_EPOCH) \
    X(76, UNSUPPORTED_COMPRESSION_TYPE) \
    X(77, STALE_BROKER_EPOCH) \
    X(78, OFFSET_NOT_AVAILABLE) \
    X(79, MEMBER_ID_REQUIRED) \
    X(80, PREFERRED_LEADER_NOT_AVAILABLE) \
    X(81, GROUP_MAX_SIZE_REACHED) \
    X(82, FENCED_INSTANCE_ID) \
    X(83, ELIGIBLE_LEADERS_NOT_AVAILABLE) \
    X(84, ELECTION_NOT_NEEDED) \
    X(85, NO_REASSIGNMENT_IN_PROGRESS) \
    X(86, GROUP_SUBSCRIBED_TO_TOPIC) \
    X(87, INVALID_RECORD) \
    X(88, UNSTABLE_OFFSET_COMMIT) \
    X(89, THROTTLING_QUOTA_EXCEEDED) \
    X(90, PRODUCER_FENCED) \
    X(91, RESOURCE_NOT_FOUND) \
    X(92, DUPLICATE_RESOURCE) \
    X(93, UNACCEPTABLE_CREDENTIAL) \
    X(94, INCONSISTENT_VOTER_SET) \
    X(95, INVALID_UPDATE_VERSION) \
    X(96, FEATURE_UPDATE_FAILED) \
    X(97, PRINCIPAL_DESERIALIZATION_FAILURE) \
    X(98, SNAPSHOT_NOT_FOUND) \
    X(99, POSITION_OUT_OF_RANGE) \
    X(100, UNKNOWN_TOPIC_ID) \
    X(101, DUPLICATE_BROKER_REGISTRATION) \
    X(102, BROKER_ID_NOT_REGISTERED) \
    X(103, INCONSISTENT_TOPIC_ID) \
    X(104, INCONSISTENT_CLUSTER_ID) \
    X(105, TRANSACTIONAL_ID_NOT_FOUND) \
    X(106, FETCH_SESSION_TOPIC_ID_ERROR) \
    X(107, INELIGIBLE_REPLICA) \
    X(108, NEW_LEADER_ELECTED) \
    X(109, OFFSET_MOVED_TO_TIERED_STORAGE) \
    X(110, FENCED_MEMBER_EPOCH) \
    X(111, UNRELEASED_INSTANCE_ID) \
    X(112, UNSUPPORTED_ASSIGNOR) \
    X(113, STALE_MEMBER_EPOCH) \
    X(114, MISMATCHED_ENDPOINT_TYPE) \
    X(115, UNSUPPORTED_ENDPOINT_TYPE) \
    X(116, UNKNOWN_CONTROLLER_ID) \
    X(117, UNKNOWN_SUBSCRIPTION_ID) \
    X(118, TELEMETRY_TOO_LARGE) \
    X(119, INVALID_REGISTRATION) \
    X(120, TRANSACTION_ABORTABLE) \
    X(121, INVALID_RECORD_STATE) \
    X(122, SHARE_SESSION_NOT_FOUND) \
    X(123, INVALID_SHARE_SESSION_EPOCH) \
    X(124, FENCED_STATE_EPOCH) \
    X(125, INVALID_VOTER_KEY) \
    X(126, DUPLICATE_VOTER) \
    X(127, VOTER_NOT_FOUND) \
    X(128, INVALID_REGULAR_EXPRESSION) \
    X(129, REBOOTSTRAP_REQUIRED) \
    X(130, STREAMS_INVALID_TOPOLOGY) \
    X(131, STREAMS_INVALID_TOPOLOGY_EPOCH) \
    X(132, STREAMS_TOPOLOGY_FENCED) \
    X(133, SHARE_SESSION_LIMIT_REACHED)

/*
 * Kafka's error codes as C names: KR_KERR_<Kafka's name>, e.g.
 * KR_KERR_TOPIC_AUTHORIZATION_FAILED = 29.  Use these, never literals.
 */
enum kr_kerr {
#define KR_KERR_ENUM_(code, name) KR_KERR_##name = (code),
    KR_KERR_LIST(KR_KERR_ENUM_)
#undef KR_KERR_ENUM_
};

/* Highest code in the table (SHARE_SESSION_LIMIT_REACHED, Kafka 4.1). */
#define KR_KERR_MAX KR_KERR_SHARE_SESSION_LIMIT_REACHED

/* Returned by kr_kerr_by_name for an unknown name: outside int16. */
#define KR_KERR_NOT_FOUND (-32769)

/* Room for any kr_kerr_format result, "UNKNOWN_ERROR_-32768" included. */
#define KR_KERR_BUFLEN 48

/*
 * Kafka's name for code ("NONE", "NOT_LEADER_OR_FOLLOWER"...): a static
 * string.  Policy: NULL for a code Errors.java does not define (newer
 * broker, or garbage); callers that print use kr_kerr_format instead.
 */
const char *kr_kerr_name(int16_t code);

/*
 * Printable name: kr_kerr_name(code), or "UNKNOWN_ERROR_<code>" written
 * into buf (KR_KERR_BUFLEN bytes) for an unknown code.  Returns either the
 * static name or buf; never NULL.
 */
const char *kr_kerr_format(int16_t code, char *buf, size_t len);

/*
 * Code for a name, case-insensitive ("unknown_topic_or_partition" -> 3).
 * Also accepts "UNKNOWN_ERROR_<n>" with n in int16 range (the inverse of
 * kr_kerr_format).  Returns KR_KERR_NOT_FOUND for anything else or NULL.
 */
int kr_kerr_by_name(const char *name);

#endif /* KR_KERR_H */
