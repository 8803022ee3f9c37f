/*
 * kr_kerr.c - Kafka error code <-> name, from Errors.java.
 *
 * The table is indexed by code + 1 (UNKNOWN_SERVER_ERROR is -1), so a
 * lookup by code is one bounds check and one load.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "kr_kerr.h"

static const char *const kr_kerr_names[KR_KERR_MAX + 2] = {
    [-1 + 1] = "UNKNOWN_SERVER_ERROR",
    [0 + 1] = "NONE",
    [1 + 1] = "OFFSET_OUT_OF_RANGE",
    [2 + 1] = "CORRUPT_MESSAGE",
    [3 + 1] = "UNKNOWN_TOPIC_OR_PARTITION",
    [4 + 1] = "INVALID_FETCH_SIZE",
    [5 + 1] = "LEADER_NOT_AVAILABLE",
    [6 + 1] = "NOT_LEADER_OR_FOLLOWER",
    [7 + 1] = "REQUEST_TIMED_OUT",
    [8 + 1] = "BROKER_NOT_AVAILABLE",
    [9 + 1] = "REPLICA_NOT_AVAILABLE",
    [10 + 1] = "MESSAGE_TOO_LARGE",
    [11 + 1] = "STALE_CONTROLLER_EPOCH",
    [12 + 1] = "OFFSET_METADATA_TOO_LARGE",
    [13 + 1] = "NETWORK_EXCEPTION",
    [14 + 1] = "COORDINATOR_LOAD_IN_PROGRESS",
    [15 + 1] = "COORDINATOR_NOT_AVAILABLE",
    [16 + 1] = "NOT_COORDINATOR",
    [17 + 1] = "INVALID_TOPIC_EXCEPTION",
    [18 + 1] = "RECORD_LIST_TOO_LARGE",
    [19 + 1] = "NOT_ENOUGH_REPLICAS",
    [20 + 1] = "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    [21 + 1] = "INVALID_REQUIRED_ACKS",
    [22 + 1] = "ILLEGAL_GENERATION",
    [23 + 1] = "INCONSISTENT_GROUP_PROTOCOL",
    [24 + 1] = "INVALID_GROUP_ID",
    [25 + 1] = "UNKNOWN_MEMBER_ID",
    [26 + 1] = "INVALID_SESSION_TIMEOUT",
    [27 + 1] = "REBALANCE_IN_PROGRESS",
    [28 + 1] = "INVALID_COMMIT_OFFSET_SIZE",
    [29 + 1] = "TOPIC_AUTHORIZATION_FAILED",
    [30 + 1] = "GROUP_AUTHORIZATION_FAILED",
    [31 + 1] = "CLUSTER_AUTHORIZATION_FAILED",
    [32 + 1] = "INVALID_TIMESTAMP",
    [33 + 1] = "UNSUPPORTED_SASL_MECHANISM",
    [34 + 1] = "ILLEGAL_SASL_STATE",
    [35 + 1] = "UNSUPPORTED_VERSION",
    [36 + 1] = "TOPIC_ALREADY_EXISTS",
    [37 + 1] = "INVALID_PARTITIONS",
    [38 + 1] = "INVALID_REPLICATION_FACTOR",
    [39 + 1] = "INVALID_REPLICA_ASSIGNMENT",
    [40 + 1] = "INVALID_CONFIG",
    [41 + 1] = "NOT_CONTROLLER",
    [42 + 1] = "INVALID_REQUEST",
    [43 + 1] = "UNSUPPORTED_FOR_MESSAGE_FORMAT",
    [44 + 1] = "POLICY_VIOLATION",
    [45 + 1] = "OUT_OF_ORDER_SEQUENCE_NUMBER",
    [46 + 1] = "DUPLICATE_SEQUENCE_NUMBER",
    [47 + 1] = "INVALID_PRODUCER_EPOCH",
    [48 + 1] = "INVALID_TXN_STATE",
    [49 + 1] = "INVALID_PRODUCER_ID_MAPPING",
    [50 + 1] = "INVALID_TRANSACTION_TIMEOUT",
    [51 + 1] = "CONCURRENT_TRANSACTIONS",
    [52 + 1] = "TRANSACTION_COORDINATOR_FENCED",
    [53 + 1] = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    [54 + 1] = "SECURITY_DISABLED",
    [55 + 1] = "OPERATION_NOT_ATTEMPTED",
    [56 + 1] = "KAFKA_STORAGE_ERROR",
    [57 + 1] = "LOG_DIR_NOT_FOUND",
    [58 + 1] = "SASL_AUTHENTICATION_FAILED",
    [59 + 1] = "UNKNOWN_PRODUCER_ID",
    [60 + 1] = "REASSIGNMENT_IN_PROGRESS",
    [61 + 1] = "DELEGATION_TOKEN_AUTH_DISABLED",
    [62 + 1] = "DELEGATION_TOKEN_NOT_FOUND",
    [63 + 1] = "DELEGATION_TOKEN_OWNER_MISMATCH",
    [64 + 1] = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED",
    [65 + 1] = "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
    [66 + 1] = "DELEGATION_TOKEN_EXPIRED",
    [67 + 1] = "INVALID_PRINCIPAL_TYPE",
    [68 + 1] = "NON_EMPTY_GROUP",
    [69 + 1] = "GROUP_ID_NOT_FOUND",
    [70 + 1] = "FETCH_SESSION_ID_NOT_FOUND",
    [71 + 1] = "INVALID_FETCH_SESSION_EPOCH",
    [72 + 1] = "LISTENER_NOT_FOUND",
    [73 + 1] = "TOPIC_DELETION_DISABLED",
    [74 + 1] = "FENCED_LEADER_EPOCH",
    [75 + 1] = "UNKNOWN_LEADER_EPOCH",
    [76 + 1] = "UNSUPPORTED_COMPRESSION_TYPE",
    [77 + 1] = "STALE_BROKER_EPOCH",
    [78 + 1] = "OFFSET_NOT_AVAILABLE",
    [79 + 1] = "MEMBER_ID_REQUIRED",
    [80 + 1] = "PREFERRED_LEADER_NOT_AVAILABLE",
    [81 + 1] = "GROUP_MAX_SIZE_REACHED",
    [82 + 1] = "FENCED_INSTANCE_ID",
    [83 + 1] = "ELIGIBLE_LEADERS_NOT_AVAILABLE",
    [84 + 1] = "ELECTION_NOT_NEEDED",
    [85 + 1] = "NO_REASSIGNMENT_IN_PROGRESS",
    [86 + 1] = "GROUP_SUBSCRIBED_TO_TOPIC",
    [87 + 1] = "INVALID_RECORD",
    [88 + 1] = "UNSTABLE_OFFSET_COMMIT",
    [89 + 1] = "THROTTLING_QUOTA_EXCEEDED",
    [90 + 1] = "PRODUCER_FENCED",
    [91 + 1] = "RESOURCE_NOT_FOUND",
    [92 + 1] = "DUPLICATE_RESOURCE",
    [93 + 1] = "UNACCEPTABLE_CREDENTIAL",
    [94 + 1] = "INCONSISTENT_VOTER_SET",
    [95 + 1] = "INVALID_UPDATE_VERSION",
    [96 + 1] = "FEATURE_UPDATE_FAILED",
    [97 + 1] = "PRINCIPAL_DESERIALIZATION_FAILURE",
    [98 + 1] = "SNAPSHOT_NOT_FOUND",
    [99 + 1] = "POSITION_OUT_OF_RANGE",
    [100 + 1] = "UNKNOWN_TOPIC_ID",
    [101 + 1] = "DUPLICATE_BROKER_REGISTRATION",
    [102 + 1] = "BROKER_ID_NOT_REGISTERED",
    [103 + 1] = "INCONSISTENT_TOPIC_ID",
    [104 + 1] = "INCONSISTENT_CLUSTER_ID",
    [105 + 1] = "TRANSACTIONAL_ID_NOT_FOUND",
    [106 + 1] = "FETCH_SESSION_TOPIC_ID_ERROR",
    [107 + 1] = "INELIGIBLE_REPLICA",
    [108 + 1] = "NEW_LEADER_ELECTED",
    [109 + 1] = "OFFSET_MOVED_TO_TIERED_STORAGE",
    [110 + 1] = "FENCED_MEMBER_EPOCH",
    [111 + 1] = "UNRELEASED_INSTANCE_ID",
    [112 + 1] = "UNSUPPORTED_ASSIGNOR",
    [113 + 1] = "STALE_MEMBER_EPOCH",
    [114 + 1] = "MISMATCHED_ENDPOINT_TYPE",
    [115 + 1] = "UNSUPPORTED_ENDPOINT_TYPE",
    [116 + 1] = "UNKNOWN_CONTROLLER_ID",
    [117 + 1] = "UNKNOWN_SUBSCRIPTION_ID",
    [118 + 1] = "TELEMETRY_TOO_LARGE",
    [119 + 1] = "INVALID_REGISTRATION",
    [120 + 1] = "TRANSACTION_ABORTABLE",
    [121 + 1] = "INVALID_RECORD_STATE",
    [122 + 1] = "SHARE_SESSION_NOT_FOUND",
    [123 + 1] = "INVALID_SHARE_SESSION_EPOCH",
    [124 + 1] = "FENCED_STATE_EPOCH",
    [125 + 1] = "INVALID_VOTER_KEY",
    [126 + 1] = "DUPLICATE_VOTER",
    [127 + 1] = "VOTER_NOT_FOUND",
    [128 + 1] = "INVALID_REGULAR_EXPRESSION",
    [129 + 1] = "REBOOTSTRAP_REQUIRED",
    [130 + 1] = "STREAMS_INVALID_TOPOLOGY",
    [131 + 1] = "STREAMS_INVALID_TOPOLOGY_EPOCH",
    [132 + 1] = "STREAMS_TOPOLOGY_FENCED",
    [133 + 1] = "SHARE_SESSION_LIMIT_REACHED",
};

const char *
kr_kerr_name(int16_t code)
{
    if (code < -1 || code > KR_KERR_MAX) {
        return NULL;
    }
    return kr_kerr_names[code + 1];
}

const char *
kr_kerr_format(int16_t code, char *buf, size_t len)
{
    const char *name = kr_kerr_name(code);

    if (name != NULL) {
        return name;
    }
    if (buf == NULL || len == 0) {
        return "UNKNOWN_ERROR";
    }
    snprintf(buf, len, "UNKNOWN_ERROR_%d", (int)code);
    return buf;
}

int
kr_kerr_by_name(const char *name)
{
    static const char unk[] = "UNKNOWN_ERROR_";
    size_t i;

    if (name == NULL) {
        return KR_KERR_NOT_FOUND;
    }
    for (i = 0; i < KR_KERR_MAX + 2; i++) {
        if (strcasecmp(name, kr_kerr_names[i]) == 0) {
            return (int)i - 1;
        }
    }
    if (strncasecmp(name, unk, sizeof(unk) - 1) == 0) {
        const char *num = name + sizeof(unk) - 1;
        char *end;
        long v;

        if (!(*num == '-' || (*num >= '0' && *num <= '9'))) {
            return KR_KERR_NOT_FOUND;
        }
        errno = 0;
        v = strtol(num, &end, 10);
        if (errno == 0 && *end == '\0' && v >= INT16_MIN && v <= INT16_MAX) {
            return (int)v;
        }
    }
    return KR_KERR_NOT_FOUND;
}
