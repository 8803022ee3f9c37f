/*
 * check_compress.c - the record compression codecs (kr_compress): round
 * trips of each codec over random and repetitive data (0 B to 1 MiB) with
 * Kafka's framings checked; frames written by OTHER implementations
 * decompressed to their known contents (snappy-java's xerial and raw
 * output, Python's gzip, the lz4 and zstd command-line tools,
 * python-lz4, python-zstandard, kafka-python's magic 0 LZ4 with the
 * KAFKA-1493 header checksum); bombs (KR_Z_TOO_LARGE, memory bounded by
 * max_out); truncated input and trailing garbage (KR_Z_CORRUPT); out left
 * at its length on every failure; two threads at once.
 *
 * How the vectors were made (Debian 12, 2026-12; the commands kept here so
 * they can be made again):
 *   snappy-java 1.1.8.3 (Debian libsnappy-java), a Java program:
 *     xerial_text     new SnappyOutputStream(bo).write(TEXT_J); close()
 *                     (Kafka's SnappyOutputStream, default block size)
 *     xerial_pattern  the same over 40000 bytes, byte i = i % 251 (two
 *                     blocks: 32 KiB + 7232)
 *     raw_text        Snappy.compress(TEXT_J)
 *   /usr/bin/python3 (Debian's python3-lz4 4.0.2, python3-zstandard 0.20,
 *   python3-kafka 2.0.2, python3-xxhash 3.2), with
 *   PAT = bytes(i % 251 for i in range(70000)), TEXT = TEXT_P:
 *     gzip_text       gzip.compress(TEXT, mtime=0)
 *     gzip_two        gzip.compress(b"first member|", mtime=0)
 *                     + gzip.compress(b"second member", mtime=0)
 *     gzip_pattern    gzip.compress(PAT, mtime=0)
 *     lz4_cli_pattern lz4 -c - < PAT (lz4 1.9.4: 4 MiB blocks, content
 *                     checksum)
 *     lz4_py_linked   lz4.frame.compress(PAT, block_size=BLOCKSIZE_MAX64KB,
 *                     block_linked=True, store_size=True,
 *                     content_checksum=True)
 *     lz4_kafka_text  lz4.frame.compress(TEXT, block_size=BLOCKSIZE_MAX64KB,
 *                     block_linked=False, content_checksum=False,
 *                     store_size=False): KafkaLZ4BlockOutputStream's
 *                     header 04 22 4d 18 60 40 82
 *     lz4_old_kafka_text  kafka.codec.lz4_encode_old_kafka(TEXT): the
 *                     magic 0 header checksum, xxh32 over magic + FLG + BD
 *                     (04 22 4d 18 60 40 1a)
 *     zstd_cli_pattern   zstd -q -c - < PAT (zstd 1.5.4 from a pipe: no
 *                     content size in the frame)
 *     zstd_py_text    ZstdCompressor(level=3, write_content_size=True)
 *                     .compress(TEXT)
 *     zstd_two        ZstdCompressor(level=1).compress(b"frame one|")
 *                     + ZstdCompressor(level=19, write_content_size=False)
 *                     .compress(b"frame two")
 */
#include "config.h"

#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <snappy-c.h>
#include <xxhash.h>
#include <zstd.h>

#include "kr_compress.h"
#include "kr_test.h"

#define TEXT_J "Hello from snappy-java, as Kafka 0.8-0.10 wrote it"
#define TEXT_P "Hello from another implementation, for krelay's kr_compress"

/* ---- the vectors (hex; see the top) ---- */
static const char xerial_text_hex[] =
    "82534e415050590000000001000000010000003432c448656c6c6f2066726f6d"
    "20736e617070792d6a6176612c206173204b61666b6120302e382d302e313020"
    "77726f7465206974";
static const char xerial_pattern_hex[] =
    "82534e41505059000000000100000001000006f9808002f0fd00010203040506"
    "0708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20212223242526"
    "2728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f40414243444546"
    "4748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f60616263646566"
    "6768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f80818283848586"
    "8788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9fa0a1a2a3a4a5a6"
    "a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6"
    "c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6"
    "e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fa000102fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00eefb0009fb0000024bc038f0fd8a8b8c8d8e8f9091929394"
    "95969798999a9b9c9d9e9fa0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4"
    "b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4"
    "d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4"
    "f5f6f7f8f9fa000102030405060708090a0b0c0d0e0f10111213141516171819"
    "1a1b1c1d1e1f202122232425262728292a2b2c2d2e2f30313233343536373839"
    "3a3b3c3d3e3f404142434445464748494a4b4c4d4e4f50515253545556575859"
    "5a5b5c5d5e5f606162636465666768696a6b6c6d6e6f70717273747576777879"
    "7a7b7c7d7e7f808182838485868788898a8b8cfefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00"
    "fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb"
    "00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00fe"
    "fb00fefb00fefb00fefb00fefb00fefb00fefb00fefb00eefb0009fb";
static const char raw_text_hex[] =
    "32c448656c6c6f2066726f6d20736e617070792d6a6176612c206173204b6166"
    "6b6120302e382d302e31302077726f7465206974";
static const char gzip_text_hex[] =
    "1f8b0800000000000203f348cdc9c957482bcacf5548cccb2fc9482d52c8cc2d"
    "c849cd4dcd2b492cc9cccfd35148cb2f52c82e4acd49ac542f0632e293f3730b"
    "8a528b8b01896c8e0d3b000000";
static const char gzip_two_hex[] =
    "1f8b08000000000002034bcb2c2a2e51c84dcd4d4a2daa0100ae20e3b30d0000"
    "001f8b08000000000002032b4e4dcecf4b51c84dcd4d4a2d02002474fa9f0d00"
    "0000";
static const char gzip_pattern_hex[] =
    "1f8b0800000000000203edcf438210000000c0cdb6b9d9b66ddbb66dd766dbb6"
    "6ddbb66d5ba75ed16de60713102c788890a14287091b2e7c8488912247891a2d"
    "7a8c98b162c7891b2f7e828489120726499a2c798a94a952a7499b2e7d868c99"
    "3267c99a2d7b8e9cb972e7c99b2f7f8182850a17295aac788992a54a97295bae"
    "7c858a952a57a95aad7a8d9ab56ad7a95baf7e83868d1a3769daac798b96ad5a"
    "b769dbae7d878e9d3a77e9daad7b8f9ebd7af7e9dbafff808183060f193a2c68"
    "f88891a3468f193b6efc848993264f993a6dfa8c99b366cf993b6ffe82858b16"
    "2f59ba6cf98a95ab56af59bb6efd868d9b366fd9ba6dfb8e9dbb76efd9bb6fff"
    "8183870e1f397aecf88993a74e9f397beefc858b972e5fb97aedfa8d9bb76edf"
    "b97beffe83878f1e3f79faecf98b97af5ebf79fbeefd878f9f3e7ff9faedfb8f"
    "9fbf7efff91ba0aeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeae"
    "aeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeae"
    "aeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeae"
    "aeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeae"
    "aeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeae"
    "aeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeae"
    "aeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeae"
    "aeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeae"
    "aeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaeaefebfeaff00c1c7e19f701101"
    "00";
static const char lz4_cli_pattern_hex[] =
    "04224d1864500817020000ffec000102030405060708090a0b0c0d0e0f101112"
    "131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132"
    "333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f505152"
    "535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f707172"
    "737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f909192"
    "939495969798999a9b9c9d9e9fa0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2"
    "b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2"
    "d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2"
    "f3f4f5f6f7f8f9fafb00ffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffff6e50d9dadb"
    "dcdd000000003192d374";
static const char lz4_py_linked_hex[] =
    "04224d184c4070110100000000006405020000ffec000102030405060708090a"
    "0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a"
    "2b2c2d2e2f303132333435363738393a3b3c3d3e3f404142434445464748494a"
    "4b4c4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a"
    "6b6c6d6e6f707172737475767778797a7b7c7d7e7f808182838485868788898a"
    "8b8c8d8e8f909192939495969798999a9b9c9d9e9fa0a1a2a3a4a5a6a7a8a9aa"
    "abacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9ca"
    "cbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9ea"
    "ebecedeeeff0f1f2f3f4f5f6f7f8f9fafb00ffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffec5014151617181b0000000fe7ffff"
    "ffffffffffffffffffffffffffffffff6950d9dadbdcdd000000003192d374";
static const char lz4_kafka_text_hex[] =
    "04224d186040823b00008048656c6c6f2066726f6d20616e6f7468657220696d"
    "706c656d656e746174696f6e2c20666f72206b72656c61792773206b725f636f"
    "6d707265737300000000";
static const char lz4_old_kafka_text_hex[] =
    "04224d1860401a3b00008048656c6c6f2066726f6d20616e6f7468657220696d"
    "706c656d656e746174696f6e2c20666f72206b72656c61792773206b725f636f"
    "6d707265737300000000";
static const char zstd_cli_pattern_hex[] =
    "28b52ffd04582d0800b40f000102030405060708090a0b0c0d0e0f1011121314"
    "15161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f3031323334"
    "35363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f5051525354"
    "55565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f7071727374"
    "75767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f9091929394"
    "95969798999a9b9c9d9e9fa0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4"
    "b5b6b7b8b9babbbcbdbebfc0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4"
    "d5d6d7d8d9dadbdcdddedfe0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4"
    "f5f6f7f8f9fa01007b39087f6ea4f3aac2bc";
static const char zstd_py_text_hex[] =
    "28b52ffd203bd9010048656c6c6f2066726f6d20616e6f7468657220696d706c"
    "656d656e746174696f6e2c20666f72206b72656c61792773206b725f636f6d70"
    "72657373";
static const char zstd_two_hex[] =
    "28b52ffd200a5100006672616d65206f6e657c28b52ffd00004900006672616d"
    "652074776f";

/* Lengths of the first member/frame of gzip_two and zstd_two (Python's
   len() of each part when they were made). */
#define GZIP_TWO_FIRST 33
#define ZSTD_TWO_FIRST 19

/* ---- helpers ---- */

/* The bytes of a hex string (freed by the caller). */
static uint8_t *
unhex(const char *h, size_t *n)
{
    size_t len = strlen(h), i;
    uint8_t *p;

    ck_assert_uint_eq(len % 2, 0);
    p = malloc(len / 2 + 1);
    ck_assert_ptr_nonnull(p);
    for (i = 0; i < len / 2; i++) {
        unsigned v;

        ck_assert_int_eq(sscanf(h + 2 * i, "%2x", &v), 1);
        p[i] = (uint8_t)v;
    }
    *n = len / 2;
    return p;
}

/* byte i = i % 251, as the vectors' PAT */
static uint8_t *
pattern(size_t n)
{
    uint8_t *p = malloc(n + 1);
    size_t i;

    ck_assert_ptr_nonnull(p);
    for (i = 0; i < n; i++)
        p[i] = (uint8_t)(i % 251);
    return p;
}

/* Test data: kind 0 random (xorshift32 from seed), kind 1 repetitive
   (Kafka-like records: a key, a counter, a constant body). */
static uint8_t *
make_data(int kind, size_t n, uint32_t seed)
{
    uint8_t *p = malloc(n + 1);
    size_t i;

    ck_assert_ptr_nonnull(p);
    if (kind == 0) {
        uint32_t x = seed | 1;

        for (i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            p[i] = (uint8_t)x;
        }
    } else {
        char rec[64];
        size_t k = 0;

        for (i = 0; i < n;) {
            int m = snprintf(rec, sizeof(rec),
                             "key-%zu|value of record %zu for krelay|", k % 7,
                             k);
            size_t c = (size_t)m < n - i ? (size_t)m : n - i;

            memcpy(p + i, rec, c);
            i += c;
            k++;
        }
    }
    return p;
}

#define PFX "PFX"
#define PFXLEN 3

/* A buffer holding "PFX": what the codecs append to. */
static struct kr_bytes
prefixed(void)
{
    struct kr_bytes b = { 0 };

    ck_assert(kr_bytes_add(&b, PFX, PFXLEN));
    return b;
}

/* Decompresses to exactly exp[0..elen) after the prefix. */
static void
expect_dec(int codec, unsigned flags, const uint8_t *in, size_t n,
           size_t max_out, const void *exp, size_t elen)
{
    struct kr_bytes out = prefixed();
    enum kr_z_outcome r = kr_decompress(codec, flags, in, n, max_out, &out);

    KR_TEST_CHECK(r == KR_Z_OK, "%s: %s, %zu bytes in",
                  kr_compression_name(codec), kr_z_outcome_name(r), n);
    KR_TEST_CHECK(out.len == PFXLEN + elen, "%s: %zu bytes out, not %zu",
                  kr_compression_name(codec), out.len - PFXLEN, elen);
    KR_TEST_CHECK(memcmp(out.p, PFX, PFXLEN) == 0, "prefix changed");
    KR_TEST_CHECK(elen == 0 || memcmp(out.p + PFXLEN, exp, elen) == 0,
                  "%s: wrong bytes", kr_compression_name(codec));
    kr_bytes_free(&out);
}

/* Fails with want, out left at its length with the prefix intact, and
   no more than max_out bytes (beyond what it had) allocated. */
static void
expect_fail(int codec, unsigned flags, const uint8_t *in, size_t n,
            size_t max_out, enum kr_z_outcome want)
{
    struct kr_bytes out = prefixed();
    size_t cap0 = out.cap;
    enum kr_z_outcome r = kr_decompress(codec, flags, in, n, max_out, &out);

    KR_TEST_CHECK(r == want, "%s, %zu bytes in, max %zu: %s, not %s",
                  kr_compression_name(codec), n, max_out,
                  kr_z_outcome_name(r), kr_z_outcome_name(want));
    KR_TEST_CHECK(out.len == PFXLEN, "out not left at its length");
    KR_TEST_CHECK(memcmp(out.p, PFX, PFXLEN) == 0, "prefix changed");
    KR_TEST_CHECK(out.cap <= (cap0 > PFXLEN + max_out ? cap0 :
                              PFXLEN + max_out),
                  "%s: %zu bytes allocated for max_out %zu",
                  kr_compression_name(codec), out.cap, max_out);
    kr_bytes_free(&out);
}

/* kr_compress after the prefix; returns the frame (freed by the caller). */
static uint8_t *
compress_frame(int codec, unsigned flags, const uint8_t *in, size_t n,
               size_t *fn)
{
    struct kr_bytes out = prefixed();
    enum kr_z_outcome r = kr_compress(codec, flags, in, n, &out);
    uint8_t *f;

    KR_TEST_CHECK(r == KR_Z_OK, "compress %s: %s", kr_compression_name(codec),
                  kr_z_outcome_name(r));
    KR_TEST_CHECK(memcmp(out.p, PFX, PFXLEN) == 0, "prefix changed");
    *fn = out.len - PFXLEN;
    f = malloc(*fn + 1);
    ck_assert_ptr_nonnull(f);
    memcpy(f, out.p + PFXLEN, *fn);
    kr_bytes_free(&out);
    return f;
}

static uint32_t
be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Kafka's framing of a frame kr_compress wrote for n input bytes. */
static void
check_framing(int codec, unsigned flags, const uint8_t *f, size_t fn,
              size_t n)
{
    static const uint8_t xerial[16] = { 0x82, 'S', 'N', 'A', 'P', 'P', 'Y',
                                        0, 0, 0, 0, 1, 0, 0, 0, 1 };
    static const uint8_t lz4h[6] = { 0x04, 0x22, 0x4d, 0x18, 0x60, 0x40 };
    static const uint8_t gz[3] = { 0x1f, 0x8b, 0x08 };
    static const uint8_t zs[4] = { 0x28, 0xb5, 0x2f, 0xfd };
    size_t i, blocks = 0, sum = 0;

    switch (codec) {
    case KR_COMPRESSION_GZIP:
        KR_TEST_CHECK(fn >= 18 && memcmp(f, gz, 3) == 0, "gzip header");
        /* ISIZE: n mod 2^32, little-endian */
        KR_TEST_CHECK(((uint32_t)f[fn - 4] | (uint32_t)f[fn - 3] << 8 |
                       (uint32_t)f[fn - 2] << 16 |
                       (uint32_t)f[fn - 1] << 24) == (uint32_t)n, "ISIZE");
        break;
    case KR_COMPRESSION_SNAPPY:
        KR_TEST_CHECK(fn >= 16 && memcmp(f, xerial, 16) == 0,
                      "xerial header");
        for (i = 16; i < fn;) {
            uint32_t bl = be32(f + i);
            size_t ul;

            KR_TEST_CHECK(snappy_uncompressed_length((const char *)f + i + 4,
                                                     bl, &ul) == SNAPPY_OK,
                          "block length");
            /* blocks of 32 KiB (snappy-java's), the last one shorter */
            KR_TEST_CHECK(ul == 32768 || i + 4 + bl == fn,
                          "block %zu: %zu bytes", blocks, ul);
            KR_TEST_CHECK(ul > 0 && ul <= 32768, "block of %zu", ul);
            sum += ul;
            blocks++;
            i += 4 + bl;
        }
        KR_TEST_CHECK(i == fn && sum == n, "blocks cover the input");
        KR_TEST_CHECK(blocks == (n + 32767) / 32768, "%zu blocks", blocks);
        break;
    case KR_COMPRESSION_LZ4:
        KR_TEST_CHECK(fn >= 11 && memcmp(f, lz4h, 6) == 0,
                      "KafkaLZ4BlockOutputStream's FLG/BD");
        /* HC: XXH32 of FLG BD (0x82), or of magic FLG BD for magic 0 */
        KR_TEST_CHECK(f[6] == ((flags & KR_Z_LZ4_KAFKA1493) ? 0x1a : 0x82),
                      "HC %02x", f[6]);
        KR_TEST_CHECK(be32(f + fn - 4) == 0, "end mark");
        /* blocks of at most 64 KiB */
        for (i = 7; i + 4 < fn;) {
            uint32_t bs = (uint32_t)f[i] | (uint32_t)f[i + 1] << 8 |
                          (uint32_t)f[i + 2] << 16 | (uint32_t)f[i + 3] << 24;

            bs &= 0x7fffffffu;
            KR_TEST_CHECK(bs > 0 && bs <= 65536, "lz4 block of %u", bs);
            blocks++;
            i += 4 + bs;
        }
        KR_TEST_CHECK(i + 4 == fn, "lz4 blocks");
        KR_TEST_CHECK(blocks == (n + 65535) / 65536, "%zu lz4 blocks",
                      blocks);
        break;
    case KR_COMPRESSION_ZSTD:
        KR_TEST_CHECK(fn >= 4 && memcmp(f, zs, 4) == 0, "zstd magic");
        KR_TEST_CHECK(ZSTD_getFrameContentSize(f, fn) == n,
                      "zstd content size");
        break;
    default:
        ck_abort();
    }
}

static const int codecs[] = {
    KR_COMPRESSION_GZIP, KR_COMPRESSION_SNAPPY, KR_COMPRESSION_LZ4,
    KR_COMPRESSION_ZSTD
};

/* ---- tests ---- */

START_TEST(test_names)
{
    ck_assert_str_eq(kr_compression_name(KR_COMPRESSION_NONE), "none");
    ck_assert_str_eq(kr_compression_name(KR_COMPRESSION_GZIP), "gzip");
    ck_assert_str_eq(kr_compression_name(KR_COMPRESSION_SNAPPY), "snappy");
    ck_assert_str_eq(kr_compression_name(KR_COMPRESSION_LZ4), "lz4");
    ck_assert_str_eq(kr_compression_name(KR_COMPRESSION_ZSTD), "zstd");
    ck_assert_str_eq(kr_compression_name(5), "unknown");
    ck_assert_str_eq(kr_compression_name(-1), "unknown");
    ck_assert_str_eq(kr_z_outcome_name(KR_Z_OK), "ok");
    ck_assert_str_eq(kr_z_outcome_name(KR_Z_CORRUPT), "corrupt");
    ck_assert_str_eq(kr_z_outcome_name(KR_Z_TOO_LARGE), "too large");
    ck_assert_str_eq(kr_z_outcome_name(KR_Z_UNSUPPORTED),
                     "unsupported codec");
    ck_assert_str_eq(kr_z_outcome_name(KR_Z_NOMEM), "out of memory");
}
END_TEST

START_TEST(test_bytes)
{
    struct kr_bytes b = { 0 };
    uint8_t big[1000];
    size_t i;

    memset(big, 0xab, sizeof(big));
    ck_assert(kr_bytes_add(&b, "", 0));
    ck_assert_uint_eq(b.len, 0);
    ck_assert(kr_bytes_add(&b, "abc", 3));
    for (i = 0; i < 100; i++)
        ck_assert(kr_bytes_add(&b, big, sizeof(big)));
    ck_assert_uint_eq(b.len, 3 + 100 * sizeof(big));
    ck_assert(b.cap >= b.len);
    ck_assert_mem_eq(b.p, "abc", 3);
    ck_assert_uint_eq(b.p[b.len - 1], 0xab);
    ck_assert(kr_bytes_reserve(&b, 5000));
    ck_assert(b.cap - b.len >= 5000);
    ck_assert_uint_eq(b.len, 3 + 100 * sizeof(big));
    /* a size that cannot be: false, b unchanged */
    ck_assert(!kr_bytes_reserve(&b, SIZE_MAX));
    ck_assert_uint_eq(b.len, 3 + 100 * sizeof(big));
    kr_bytes_free(&b);
    ck_assert_ptr_null(b.p);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(b.cap, 0);
}
END_TEST

START_TEST(test_unsupported)
{
    static const int bad[] = { KR_COMPRESSION_NONE, 5, 7, -1 };
    struct kr_bytes out = prefixed();
    size_t i;

    for (i = 0; i < KR_ARRAY_LEN(bad); i++) {
        ck_assert_int_eq(kr_decompress(bad[i], 0, (const uint8_t *)"x", 1,
                                       100, &out), KR_Z_UNSUPPORTED);
        ck_assert_int_eq(kr_compress(bad[i], 0, (const uint8_t *)"x", 1,
                                     &out), KR_Z_UNSUPPORTED);
        ck_assert_uint_eq(out.len, PFXLEN);
    }
    kr_bytes_free(&out);
}
END_TEST

/* Each codec (lz4 with and without the magic 0 checksum), random and
   repetitive data, 0, 1, 100, 64 KiB + 1 and 1 MiB: Kafka's framing,
   back to the same bytes with max_out the size, KR_Z_TOO_LARGE one
   byte below it. */
START_TEST(test_round_trips)
{
    static const size_t sizes[] = { 0, 1, 100, 65537, 1u << 20 };
    size_t c, k, s, fn;
    unsigned fl;

    for (c = 0; c < KR_ARRAY_LEN(codecs); c++)
        for (fl = 0; fl <= (codecs[c] == KR_COMPRESSION_LZ4 ? 1u : 0u); fl++)
            for (k = 0; k < 2; k++)
                for (s = 0; s < KR_ARRAY_LEN(sizes); s++) {
                    size_t n = sizes[s];
                    uint8_t *d = make_data((int)k, n, (uint32_t)(n + c));
                    uint8_t *f = compress_frame(codecs[c], fl, d, n, &fn);

                    check_framing(codecs[c], fl, f, fn, n);
                    if (k == 1 && n >= 65537)
                        KR_TEST_CHECK(fn < n / 4, "%s: %zu -> %zu",
                                      kr_compression_name(codecs[c]), n, fn);
                    expect_dec(codecs[c], fl, f, fn, n, d, n);
                    if (n > 0)
                        expect_fail(codecs[c], fl, f, fn, n - 1,
                                    KR_Z_TOO_LARGE);
                    if (fl)     /* magic 0's checksum needs the flag */
                        expect_fail(codecs[c], 0, f, fn, n, KR_Z_CORRUPT);
                    else if (codecs[c] == KR_COMPRESSION_LZ4)
                        expect_dec(codecs[c], KR_Z_LZ4_KAFKA1493, f, fn, n,
                                   d, n);
                    free(f);
                    free(d);
                }
}
END_TEST

/* Appending: several frames decompressed one after the other into one
   buffer, each after what the previous ones left. */
START_TEST(test_append)
{
    struct kr_bytes out = prefixed();
    uint8_t *d = make_data(1, 5000, 1);
    size_t c, fn, at = PFXLEN;

    for (c = 0; c < KR_ARRAY_LEN(codecs); c++) {
        uint8_t *f = compress_frame(codecs[c], 0, d, 5000, &fn);

        ck_assert_int_eq(kr_decompress(codecs[c], 0, f, fn, 5000, &out),
                         KR_Z_OK);
        ck_assert_uint_eq(out.len, at + 5000);
        ck_assert_mem_eq(out.p + at, d, 5000);
        at += 5000;
        free(f);
    }
    ck_assert_mem_eq(out.p, PFX, PFXLEN);
    kr_bytes_free(&out);
    free(d);
}
END_TEST

/* Java's snappy-java (what Kafka 0.8-0.10 wrote): xerial framing, two
   blocks, raw; concatenated streams; kr_compress writes the same bytes. */
START_TEST(test_snappy_java)
{
    size_t n, m, r, fn;
    uint8_t *x = unhex(xerial_text_hex, &n);
    uint8_t *xp = unhex(xerial_pattern_hex, &m);
    uint8_t *raw = unhex(raw_text_hex, &r);
    uint8_t *p40 = pattern(40000), *f, *two;
    char both[2 * sizeof(TEXT_J)];

    expect_dec(KR_COMPRESSION_SNAPPY, 0, x, n, 1000, TEXT_J,
               strlen(TEXT_J));
    expect_dec(KR_COMPRESSION_SNAPPY, 0, xp, m, 40000, p40, 40000);
    ck_assert_uint_eq(be32(xp + 16) + 20 < m, 1);    /* two blocks */
    expect_dec(KR_COMPRESSION_SNAPPY, 0, raw, r, 1000, TEXT_J,
               strlen(TEXT_J));
    /* snappy-java's block size is 32 KiB: our frame is byte for byte
       theirs for a short text (one literal block) */
    f = compress_frame(KR_COMPRESSION_SNAPPY, 0,
                       (const uint8_t *)TEXT_J, strlen(TEXT_J), &fn);
    ck_assert_uint_eq(fn, n);
    ck_assert_mem_eq(f, x, n);
    free(f);
    /* two whole streams back to back (SnappyInputStream reads on) */
    two = malloc(2 * n);
    ck_assert_ptr_nonnull(two);
    memcpy(two, x, n);
    memcpy(two + n, x, n);
    snprintf(both, sizeof(both), "%s%s", TEXT_J, TEXT_J);
    expect_dec(KR_COMPRESSION_SNAPPY, 0, two, 2 * n, 1000, both,
               strlen(both));
    /* the header alone: an empty stream (what snappy-java writes for
       nothing) */
    expect_dec(KR_COMPRESSION_SNAPPY, 0, x, 16, 1000, "", 0);
    f = compress_frame(KR_COMPRESSION_SNAPPY, 0, NULL, 0, &fn);
    ck_assert_uint_eq(fn, 16);
    ck_assert_mem_eq(f, x, 16);
    free(f);
    /* version 0 in the header: refused, as SnappyInputStream does */
    x[11] = 0;
    expect_fail(KR_COMPRESSION_SNAPPY, 0, x, n, 1000, KR_Z_CORRUPT);
    free(two);
    free(p40);
    free(raw);
    free(xp);
    free(x);
}
END_TEST

/* Frames from Python's gzip, the lz4 and zstd tools, python-lz4,
   python-zstandard, kafka-python. */
START_TEST(test_other_implementations)
{
    uint8_t *p70 = pattern(70000), *v;
    size_t n;

    v = unhex(gzip_text_hex, &n);
    expect_dec(KR_COMPRESSION_GZIP, 0, v, n, 1000, TEXT_P, strlen(TEXT_P));
    free(v);
    v = unhex(gzip_two_hex, &n);
    expect_dec(KR_COMPRESSION_GZIP, 0, v, n, 1000,
               "first member|second member", 26);
    free(v);
    v = unhex(gzip_pattern_hex, &n);
    expect_dec(KR_COMPRESSION_GZIP, 0, v, n, 70000, p70, 70000);
    free(v);

    v = unhex(lz4_cli_pattern_hex, &n);
    expect_dec(KR_COMPRESSION_LZ4, 0, v, n, 70000, p70, 70000);
    free(v);
    v = unhex(lz4_py_linked_hex, &n);
    expect_dec(KR_COMPRESSION_LZ4, 0, v, n, 70000, p70, 70000);
    free(v);
    v = unhex(lz4_kafka_text_hex, &n);
    expect_dec(KR_COMPRESSION_LZ4, 0, v, n, 1000, TEXT_P, strlen(TEXT_P));
    free(v);

    v = unhex(zstd_cli_pattern_hex, &n);
    ck_assert(ZSTD_getFrameContentSize(v, n) == ZSTD_CONTENTSIZE_UNKNOWN);
    expect_dec(KR_COMPRESSION_ZSTD, 0, v, n, 70000, p70, 70000);
    /* a max_out far above: the output still grows only as needed */
    expect_dec(KR_COMPRESSION_ZSTD, 0, v, n, 1u << 30, p70, 70000);
    free(v);
    v = unhex(zstd_py_text_hex, &n);
    expect_dec(KR_COMPRESSION_ZSTD, 0, v, n, 1000, TEXT_P, strlen(TEXT_P));
    free(v);
    v = unhex(zstd_two_hex, &n);
    expect_dec(KR_COMPRESSION_ZSTD, 0, v, n, 1000, "frame one|frame two",
               19);
    free(v);
    free(p70);
}
END_TEST

/*
 * KAFKA-1493: magic 0 LZ4 with the header checksum over the magic number
 * too.  kafka-python's frame (lz4_encode_old_kafka) needs the flag;
 * Kafka's magic 1 frame is read either way; kr_compress writes each
 * byte for byte as they do (the text does not compress: one stored
 * block).  A frame with a content size (python-lz4's) broken the same
 * way: HC recomputed here over magic + FLG + BD + content size.
 */
START_TEST(test_lz4_kafka1493)
{
    size_t n, m, ln, fn;
    uint8_t *old = unhex(lz4_old_kafka_text_hex, &n);
    uint8_t *good = unhex(lz4_kafka_text_hex, &m);
    uint8_t *lk = unhex(lz4_py_linked_hex, &ln);
    uint8_t *p70 = pattern(70000), *f;
    const size_t tl = strlen(TEXT_P);

    ck_assert_uint_eq(n, m);
    ck_assert_uint_eq(old[6], 0x1a);
    ck_assert_uint_eq(good[6], 0x82);
    ck_assert_mem_eq(old + 7, good + 7, n - 7);
    expect_dec(KR_COMPRESSION_LZ4, KR_Z_LZ4_KAFKA1493, old, n, 1000, TEXT_P,
               tl);
    expect_fail(KR_COMPRESSION_LZ4, 0, old, n, 1000, KR_Z_CORRUPT);
    expect_dec(KR_COMPRESSION_LZ4, KR_Z_LZ4_KAFKA1493, good, m, 1000,
               TEXT_P, tl);
    /* neither checksum: corrupt with the flag too */
    old[6] ^= 0x01;
    if (old[6] == 0x82)
        old[6] ^= 0x03;
    expect_fail(KR_COMPRESSION_LZ4, KR_Z_LZ4_KAFKA1493, old, n, 1000,
                KR_Z_CORRUPT);
    old[6] = 0x1a;

    f = compress_frame(KR_COMPRESSION_LZ4, KR_Z_LZ4_KAFKA1493,
                       (const uint8_t *)TEXT_P, tl, &fn);
    ck_assert_uint_eq(fn, n);
    ck_assert_mem_eq(f, old, n);
    free(f);
    f = compress_frame(KR_COMPRESSION_LZ4, 0, (const uint8_t *)TEXT_P, tl,
                       &fn);
    ck_assert_uint_eq(fn, m);
    ck_assert_mem_eq(f, good, m);
    free(f);

    /* content size set (FLG 0x6c here): descriptor of 10 bytes */
    ck_assert_uint_eq(lk[4] & 0x08, 0x08);
    ck_assert_uint_eq(lk[14], (XXH32(lk + 4, 10, 0) >> 8) & 0xff);
    lk[14] = (uint8_t)((XXH32(lk, 14, 0) >> 8) & 0xff);
    if (lk[14] != (uint8_t)((XXH32(lk + 4, 10, 0) >> 8) & 0xff)) {
        expect_fail(KR_COMPRESSION_LZ4, 0, lk, ln, 70000, KR_Z_CORRUPT);
    }
    expect_dec(KR_COMPRESSION_LZ4, KR_Z_LZ4_KAFKA1493, lk, ln, 70000, p70,
               70000);
    free(p70);
    free(lk);
    free(good);
    free(old);
}
END_TEST

/* Bombs: 8 MiB of zeros compress to little; with max_out 1 MiB each
   codec stops at KR_Z_TOO_LARGE, having allocated at most max_out. */
START_TEST(test_bombs)
{
    const size_t big = 8u << 20, lim = 1u << 20;
    uint8_t *z = calloc(1, big), *f, *raw;
    size_t c, fn, rn;

    ck_assert_ptr_nonnull(z);
    for (c = 0; c < KR_ARRAY_LEN(codecs); c++) {
        f = compress_frame(codecs[c], 0, z, big, &fn);
        KR_TEST_CHECK(fn < big / 20, "%s bomb: %zu bytes",
                      kr_compression_name(codecs[c]), fn);
        expect_fail(codecs[c], 0, f, fn, lim, KR_Z_TOO_LARGE);
        expect_fail(codecs[c], 0, f, fn, 0, KR_Z_TOO_LARGE);
        expect_fail(codecs[c], 0, f, fn, big - 1, KR_Z_TOO_LARGE);
        free(f);
    }
    /* a raw snappy block declaring 8 MiB: nothing reserved for it */
    rn = snappy_max_compressed_length(big);
    raw = malloc(rn);
    ck_assert_ptr_nonnull(raw);
    ck_assert_int_eq(snappy_compress((const char *)z, big, (char *)raw, &rn),
                     SNAPPY_OK);
    expect_fail(KR_COMPRESSION_SNAPPY, 0, raw, rn, lim, KR_Z_TOO_LARGE);
    expect_fail(KR_COMPRESSION_SNAPPY, 0, raw, rn, 64, KR_Z_TOO_LARGE);
    /* ... and one declaring 8 MiB in 5 bytes (more than 22 times its
       size): corrupt, and nothing reserved for it */
    {
        static const uint8_t liar[5] = { 0x80, 0x80, 0x80, 0x04, 0x00 };
        struct kr_bytes out = prefixed();
        size_t cap0 = out.cap;

        ck_assert_int_eq(kr_decompress(KR_COMPRESSION_SNAPPY, 0, liar, 5,
                                       1u << 30, &out), KR_Z_CORRUPT);
        ck_assert_uint_eq(out.len, PFXLEN);
        ck_assert_uint_eq(out.cap, cap0);
        kr_bytes_free(&out);
    }
    free(raw);
    /* zstd without a content size (the CLI's): the streaming path */
    {
        size_t n;
        uint8_t *v = unhex(zstd_cli_pattern_hex, &n);

        expect_fail(KR_COMPRESSION_ZSTD, 0, v, n, 65536, KR_Z_TOO_LARGE);
        expect_fail(KR_COMPRESSION_ZSTD, 0, v, n, 69999, KR_Z_TOO_LARGE);
        free(v);
    }
    /* empty input to max_out 0: fine */
    for (c = 0; c < KR_ARRAY_LEN(codecs); c++) {
        f = compress_frame(codecs[c], 0, NULL, 0, &fn);
        expect_dec(codecs[c], 0, f, fn, 0, "", 0);
        free(f);
    }
    free(z);
}
END_TEST

struct trunc_case {
    int codec;
    unsigned flags;
    const char *hex;
    size_t plen;          /* pattern(plen), or the text */
    const char *text;
    size_t ok_at;         /* a prefix that is whole (0: none) */
    const char *ok_text;
};

/* Every proper prefix of each vector is KR_Z_CORRUPT (but where a
   prefix ends at a member/frame boundary: the members before it); a
   byte or four appended are KR_Z_CORRUPT. */
START_TEST(test_truncated_and_trailing)
{
    static const struct trunc_case cases[] = {
        { KR_COMPRESSION_GZIP, 0, gzip_text_hex, 0, TEXT_P, 0, NULL },
        { KR_COMPRESSION_GZIP, 0, gzip_two_hex, 0,
          "first member|second member", GZIP_TWO_FIRST, "first member|" },
        { KR_COMPRESSION_GZIP, 0, gzip_pattern_hex, 70000, NULL, 0, NULL },
        { KR_COMPRESSION_SNAPPY, 0, raw_text_hex, 0, TEXT_J, 0, NULL },
        { KR_COMPRESSION_SNAPPY, 0, xerial_text_hex, 0, TEXT_J, 16, "" },
        { KR_COMPRESSION_LZ4, 0, lz4_cli_pattern_hex, 70000, NULL, 0, NULL },
        { KR_COMPRESSION_LZ4, 0, lz4_py_linked_hex, 70000, NULL, 0, NULL },
        { KR_COMPRESSION_LZ4, 0, lz4_kafka_text_hex, 0, TEXT_P, 0, NULL },
        { KR_COMPRESSION_LZ4, KR_Z_LZ4_KAFKA1493, lz4_old_kafka_text_hex, 0,
          TEXT_P, 0, NULL },
        { KR_COMPRESSION_ZSTD, 0, zstd_cli_pattern_hex, 70000, NULL, 0,
          NULL },
        { KR_COMPRESSION_ZSTD, 0, zstd_py_text_hex, 0, TEXT_P, 0, NULL },
        { KR_COMPRESSION_ZSTD, 0, zstd_two_hex, 0, "frame one|frame two",
          ZSTD_TWO_FIRST, "frame one|" },
    };
    static const uint8_t tails[][4] = { { 0 }, { 'A' }, { 0, 0, 0, 0 } };
    static const size_t tail_len[] = { 1, 1, 4 };
    size_t c, i, t, n;

    for (c = 0; c < KR_ARRAY_LEN(cases); c++) {
        const struct trunc_case *k = &cases[c];
        uint8_t *v = unhex(k->hex, &n), *e, *w;
        size_t elen = k->text ? strlen(k->text) : k->plen;

        e = k->text ? (uint8_t *)strdup(k->text) : pattern(k->plen);
        ck_assert_ptr_nonnull(e);
        expect_dec(k->codec, k->flags, v, n, elen, e, elen);
        for (i = 0; i < n; i++) {
            if (k->ok_at != 0 && i == k->ok_at)
                expect_dec(k->codec, k->flags, v, i, elen, k->ok_text,
                           strlen(k->ok_text));
            else
                expect_fail(k->codec, k->flags, v, i, elen, KR_Z_CORRUPT);
        }
        w = malloc(n + 4);
        ck_assert_ptr_nonnull(w);
        memcpy(w, v, n);
        for (t = 0; t < KR_ARRAY_LEN(tails); t++) {
            memcpy(w + n, tails[t], tail_len[t]);
            expect_fail(k->codec, k->flags, w, n + tail_len[t], elen + 100,
                        KR_Z_CORRUPT);
        }
        free(w);
        free(e);
        free(v);
    }
}
END_TEST

/* Checksums: gzip's CRC-32 and ISIZE, lz4's content checksum. */
START_TEST(test_checksums)
{
    uint8_t *p70 = pattern(70000), *v;
    size_t n;

    v = unhex(gzip_pattern_hex, &n);
    v[n - 8] ^= 0x01;                   /* CRC-32 */
    expect_fail(KR_COMPRESSION_GZIP, 0, v, n, 70000, KR_Z_CORRUPT);
    v[n - 8] ^= 0x01;
    v[n - 4] ^= 0x01;                   /* ISIZE */
    expect_fail(KR_COMPRESSION_GZIP, 0, v, n, 70000 + 10, KR_Z_CORRUPT);
    free(v);
    v = unhex(lz4_cli_pattern_hex, &n);
    v[n - 1] ^= 0x01;                   /* content checksum */
    expect_fail(KR_COMPRESSION_LZ4, 0, v, n, 70000, KR_Z_CORRUPT);
    free(v);
    free(p70);
}
END_TEST

/* Two threads, each with its own contexts, at once. */
static void *
thread_main(void *arg)
{
    uint32_t seed = (uint32_t)(uintptr_t)arg;
    uint8_t *d = make_data(1, 100000, seed);
    size_t it, c;
    long bad = 0;

    for (it = 0; it < 10; it++)
        for (c = 0; c < KR_ARRAY_LEN(codecs); c++) {
            struct kr_bytes f = { 0 }, o = { 0 };

            if (kr_compress(codecs[c], 0, d, 100000, &f) != KR_Z_OK ||
                kr_decompress(codecs[c], 0, f.p, f.len, 100000, &o) !=
                KR_Z_OK || o.len != 100000 || memcmp(o.p, d, 100000) != 0)
                bad++;
            kr_bytes_free(&f);
            kr_bytes_free(&o);
        }
    free(d);
    return (void *)bad;
}

START_TEST(test_threads)
{
    pthread_t th[2];
    void *r;
    int i;

    for (i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main,
                                        (void *)(uintptr_t)(i + 7)), 0);
    for (i = 0; i < 2; i++) {
        ck_assert_int_eq(pthread_join(th[i], &r), 0);
        ck_assert_ptr_null(r);
    }
}
END_TEST

static Suite *
compress_suite(void)
{
    Suite *s = suite_create("kr_compress");
    TCase *tc = tcase_create("codecs");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_bytes);
    tcase_add_test(tc, test_unsupported);
    tcase_add_test(tc, test_round_trips);
    tcase_add_test(tc, test_append);
    tcase_add_test(tc, test_snappy_java);
    tcase_add_test(tc, test_other_implementations);
    tcase_add_test(tc, test_lz4_kafka1493);
    tcase_add_test(tc, test_bombs);
    tcase_add_test(tc, test_truncated_and_trailing);
    tcase_add_test(tc, test_checksums);
    tcase_add_test(tc, test_threads);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(compress_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
