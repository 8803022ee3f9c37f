/*
 * kr_topics.c - topics named by decoded messages, and the TopicId map
 * (see kr_topics.h).
 */
#include "config.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kr_api_keys.h"
#include "kr_topics.h"

/* ---- per-struct visit table ------------------------------------------- */

#define KR_TI_NAMES 4            /* topicName fields kept per struct */
#define KR_TI_PARTS 2            /* partition-array candidates per struct */
#define KR_RESOURCE_TOPIC 2      /* ResourceType / ConfigResource.Type TOPIC */

/*
 * What a walk looks at in one struct.  Field indexes are within the
 * struct; -1 for none.  A struct with more than 64 fields (none in
 * Kafka's schemas so far) descends into every struct field (all = 1).
 */
struct kr_tinfo {
    uint64_t child_mask;         /* struct / []struct fields to descend */
    int8_t name[KR_TI_NAMES];    /* string / []string topicName fields */
    int8_t parts[KR_TI_PARTS];   /* arrays whose entries are partitions */
    int8_t id;                   /* uuid "TopicId" */
    int8_t rname;                /* string ResourceName(Filter) */
    int8_t rtype;                /* int8 ResourceType(Filter) */
    uint8_t can;                 /* this struct or below may name a topic */
    uint8_t all;
    uint8_t state;               /* build: 0 new, 1 in progress, 2 done */
};

static _Atomic(struct kr_tinfo *) kr_tinfo_tab;

/* The element struct of a partition array: it has an int32 partition. */
static bool
struct_is_partition(uint16_t sid)
{
    static const enum kr_field_id ids[] = {
        KR_FIELD_PARTITION_INDEX, KR_FIELD_PARTITION, KR_FIELD_PARTITION_ID,
        KR_FIELD_INDEX
    };
    const struct kr_struct_desc *sd;
    unsigned i, k;

    if (sid >= kr_nstructs) {
        return false;
    }
    sd = &kr_structs[sid];
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        if (f->type != KR_T_INT32) {
            continue;
        }
        for (k = 0; k < KR_ARRAY_LEN(ids); k++) {
            if (f->id == ids[k]) {
                return true;
            }
        }
    }
    return false;
}

static bool
field_is_partitions(const struct kr_field_desc *f)
{
    if (f->type != KR_T_ARRAY) {
        return false;
    }
    if (f->elem_type == KR_T_INT32) {
        /* a pattern over names (Partitions, PartitionIndexes...), not one
         * field: stays a string match */
        return strstr(f->name, "Partition") != NULL;
    }
    return f->elem_type == KR_T_STRUCT && struct_is_partition(f->struct_id);
}

/*
 * The fields of struct sid that name topics or partitions (everything but
 * child_mask / can / state).
 */
static void
tinfo_fields(uint16_t sid, struct kr_tinfo *ti)
{
    const struct kr_struct_desc *sd = &kr_structs[sid];
    unsigned i, nn = 0, np = 0;
    int rname = -1, rtype = -1;

    memset(ti->name, -1, sizeof(ti->name));
    memset(ti->parts, -1, sizeof(ti->parts));
    ti->id = -1;
    ti->rname = -1;
    ti->rtype = -1;
    ti->all = sd->nfields > 64;
    for (i = 0; i < sd->nfields && i < 127; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];

        if (f->entity == KR_E_TOPIC_NAME &&
            (f->type == KR_T_STRING ||
             (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRING))) {
            if (nn < KR_TI_NAMES) {
                ti->name[nn++] = (int8_t)i;
            }
        } else if (f->type == KR_T_UUID && f->id == KR_FIELD_TOPIC_ID) {
            ti->id = (int8_t)i;
        } else if (f->type == KR_T_STRING &&
                   (f->id == KR_FIELD_RESOURCE_NAME ||
                    f->id == KR_FIELD_RESOURCE_NAME_FILTER)) {
            rname = (int)i;
        } else if (f->type == KR_T_INT8 &&
                   (f->id == KR_FIELD_RESOURCE_TYPE ||
                    f->id == KR_FIELD_RESOURCE_TYPE_FILTER)) {
            rtype = (int)i;
        }
        if (np < KR_TI_PARTS && field_is_partitions(f)) {
            ti->parts[np++] = (int8_t)i;
        }
    }
    if (rname >= 0 && rtype >= 0) {
        ti->rname = (int8_t)rname;
        ti->rtype = (int8_t)rtype;
    }
    ti->can = nn > 0 || ti->id >= 0 || ti->rname >= 0 || ti->all;
}

static void
tinfo_build(struct kr_tinfo *tab, uint16_t sid, unsigned depth)
{
    struct kr_tinfo *ti = &tab[sid];
    const struct kr_struct_desc *sd = &kr_structs[sid];
    unsigned i;

    if (ti->state != 0) {
        return;                  /* done, or a cycle (none in Kafka) */
    }
    ti->state = 1;
    tinfo_fields(sid, ti);
    for (i = 0; i < sd->nfields && i < 64; i++) {
        const struct kr_field_desc *f = &kr_fields[sd->first_field + i];
        bool is_struct = f->type == KR_T_STRUCT ||
                         (f->type == KR_T_ARRAY &&
                          f->elem_type == KR_T_STRUCT);

        if (is_struct && f->struct_id < kr_nstructs && depth < 32) {
            tinfo_build(tab, f->struct_id, depth + 1);
            if (tab[f->struct_id].can) {
                ti->can = 1;
                ti->child_mask |= UINT64_C(1) << i;
            }
        }
    }
    ti->state = 2;
}

/*
 * The table, built on first use.  Concurrent first users may each build
 * one; the first published wins and the others free theirs.  NULL only
 * when out of memory (callers then walk without it).
 */
static const struct kr_tinfo *
tinfo_table(void)
{
    struct kr_tinfo *t = atomic_load_explicit(&kr_tinfo_tab,
                                              memory_order_acquire);
    struct kr_tinfo *expect = NULL;
    uint32_t sid;

    if (t != NULL) {
        return t;
    }
    t = calloc(kr_nstructs, sizeof(*t));
    if (t == NULL) {
        return NULL;
    }
    for (sid = 0; sid < kr_nstructs; sid++) {
        tinfo_build(t, (uint16_t)sid, 0);
    }
    if (!atomic_compare_exchange_strong_explicit(&kr_tinfo_tab, &expect, t,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire)) {
        free(t);
        return expect;
    }
    return t;
}

void
kr_topics_init(void)
{
    (void)tinfo_table();
}

/*
 * Out-of-memory path: the info of one struct computed on the stack; every
 * struct child is visited (all = 1).
 */
static void
tinfo_one(uint16_t sid, struct kr_tinfo *out)
{
    memset(out, 0, sizeof(*out));
    tinfo_fields(sid, out);
    out->all = 1;
    out->can = 1;
}

bool
kr_topics_possible(uint16_t sid)
{
    const struct kr_tinfo *tab;

    if (sid >= kr_nstructs) {
        return false;
    }
    tab = tinfo_table();
    return tab == NULL || tab[sid].can;
}

/* ---- walk --------------------------------------------------------------- */

typedef bool (*kr_topic_cb)(void *arg, const char *topic, size_t len,
                            unsigned partitions);

struct kr_twalk {
    const struct kr_tinfo *tab;
    const struct kr_topic_map *map;
    kr_topic_cb cb;
    void *arg;
    size_t unresolved;                  /* TopicIds not in map */
};

static bool
val_here(const struct kr_node *n, int idx)
{
    const struct kr_field_desc *f;

    if (idx < 0 || (unsigned)idx >= kr_structs[n->struct_id].nfields) {
        return false;
    }
    f = kr_node_field(n, (unsigned)idx);
    return kr_vrange_has(f->versions, n->version) &&
           !(f->tag >= 0 && kr_vrange_has(f->tagged, n->version) &&
             !n->vals[idx].present);
}

static bool
str_ok(const struct kr_val *v)
{
    return !v->is_null && v->u.s.len >= 0 &&
           (v->u.s.p != NULL || v->u.s.len == 0);
}

static bool walk_node(struct kr_twalk *w, const struct kr_node *n,
                      unsigned depth);

static bool
walk_child(struct kr_twalk *w, const struct kr_node *n, unsigned i,
           unsigned depth)
{
    const struct kr_field_desc *f = kr_node_field(n, i);
    const struct kr_val *v = &n->vals[i];
    uint32_t k;

    if (!val_here(n, (int)i) || v->is_null) {
        return true;
    }
    if (f->type == KR_T_STRUCT) {
        return v->u.node == NULL || walk_node(w, v->u.node, depth + 1);
    }
    if (f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT &&
        v->u.arr != NULL) {
        for (k = 0; k < v->u.arr->n; k++) {
            const struct kr_node *e = v->u.arr->items[k].u.node;

            if (!v->u.arr->items[k].is_null && e != NULL &&
                !walk_node(w, e, depth + 1)) {
                return false;
            }
        }
    }
    return true;
}

static bool
walk_node(struct kr_twalk *w, const struct kr_node *n, unsigned depth)
{
    struct kr_tinfo local;
    const struct kr_tinfo *ti;
    const struct kr_struct_desc *sd;
    unsigned parts = 0, i;
    bool named = false;

    if (n == NULL || n->struct_id >= kr_nstructs || depth > 64) {
        return true;
    }
    sd = &kr_structs[n->struct_id];
    if (w->tab != NULL) {
        ti = &w->tab[n->struct_id];
    } else {
        tinfo_one(n->struct_id, &local);
        ti = &local;
    }
    if (!ti->can) {
        return true;
    }
    for (i = 0; i < KR_TI_PARTS; i++) {
        int p = ti->parts[i];

        if (val_here(n, p)) {
            const struct kr_val *v = &n->vals[p];

            if (!v->is_null && v->u.arr != NULL) {
                parts = v->u.arr->n;
            }
            break;
        }
    }
    for (i = 0; i < KR_TI_NAMES; i++) {
        int idx = ti->name[i];
        const struct kr_field_desc *f;
        const struct kr_val *v;

        if (!val_here(n, idx)) {
            continue;
        }
        f = kr_node_field(n, (unsigned)idx);
        v = &n->vals[idx];
        if (f->type == KR_T_STRING) {
            if (str_ok(v)) {
                named = true;
                if (!w->cb(w->arg, (const char *)v->u.s.p,
                           (size_t)v->u.s.len, parts)) {
                    return false;
                }
            }
        } else if (!v->is_null && v->u.arr != NULL) {
            uint32_t k;

            for (k = 0; k < v->u.arr->n; k++) {
                const struct kr_val *e = &v->u.arr->items[k];

                if (str_ok(e)) {
                    named = true;
                    if (!w->cb(w->arg, (const char *)e->u.s.p,
                               (size_t)e->u.s.len, 0)) {
                        return false;
                    }
                }
            }
        }
    }
    if (!named && val_here(n, ti->id)) {
        const struct kr_val *v = &n->vals[ti->id];
        static const uint8_t zero[16];

        if (v->u.s.p != NULL && v->u.s.len == 16 &&
            memcmp(v->u.s.p, zero, 16) != 0) {
            const char *name = kr_topic_map_name(w->map, v->u.s.p);
            char buf[23];

            if (name == NULL) {
                kr_uuid_format(v->u.s.p, buf);
                name = buf;
                w->unresolved++;
            }
            if (!w->cb(w->arg, name, strlen(name), parts)) {
                return false;
            }
        }
    }
    if (val_here(n, ti->rname) && val_here(n, ti->rtype) &&
        n->vals[ti->rtype].u.i == KR_RESOURCE_TOPIC &&
        str_ok(&n->vals[ti->rname])) {
        const struct kr_val *v = &n->vals[ti->rname];

        if (!w->cb(w->arg, (const char *)v->u.s.p, (size_t)v->u.s.len, 0)) {
            return false;
        }
    }
    for (i = 0; i < sd->nfields; i++) {
        const struct kr_field_desc *f;

        if (ti->all || w->tab == NULL) {
            f = kr_node_field(n, i);
            if (f->type != KR_T_STRUCT &&
                !(f->type == KR_T_ARRAY && f->elem_type == KR_T_STRUCT)) {
                continue;
            }
        } else if (i >= 64 || !(ti->child_mask & (UINT64_C(1) << i))) {
            continue;
        }
        if (!walk_child(w, n, i, depth)) {
            return false;
        }
    }
    return true;
}

void
kr_topics_each_node(const struct kr_node *n, const struct kr_topic_map *map,
                    kr_topic_cb cb, void *arg)
{
    struct kr_twalk w;

    if (n == NULL || cb == NULL) {
        return;
    }
    w.tab = tinfo_table();
    w.map = map;
    w.cb = cb;
    w.arg = arg;
    w.unresolved = 0;
    (void)walk_node(&w, n, 0);
}

static bool
count_only(void *arg, const char *topic, size_t len, unsigned partitions)
{
    (void)arg;
    (void)topic;
    (void)len;
    (void)partitions;
    return true;
}

size_t
kr_topics_unresolved(const struct kr_msg *m, const struct kr_topic_map *map)
{
    struct kr_twalk w;

    if (m == NULL || m->body == NULL) {
        return 0;
    }
    w.tab = tinfo_table();
    w.map = map;
    w.cb = count_only;
    w.arg = NULL;
    w.unresolved = 0;
    (void)walk_node(&w, m->body, 0);
    return w.unresolved;
}

void
kr_topics_each(const struct kr_msg *m, const struct kr_topic_map *map,
               kr_topic_cb cb, void *arg)
{
    if (m == NULL) {
        return;
    }
    kr_topics_each_node(m->body, map, cb, arg);
}

/* ---- TopicId map --------------------------------------------------------- */

/* Open addressing, linear probing; ids are random, so any 8 bytes hash. */
struct kr_tm_entry {
    uint8_t id[16];
    char *name;                  /* NULL: empty slot */
};

struct kr_topic_map {
    struct kr_tm_entry *slots;
    size_t cap;                  /* power of two */
    size_t n;
};

struct kr_topic_map *
kr_topic_map_new(void)
{
    struct kr_topic_map *m = calloc(1, sizeof(*m));

    if (m == NULL) {
        return NULL;
    }
    m->cap = 64;
    m->slots = calloc(m->cap, sizeof(*m->slots));
    if (m->slots == NULL) {
        free(m);
        return NULL;
    }
    return m;
}

void
kr_topic_map_free(struct kr_topic_map *m)
{
    size_t i;

    if (m == NULL) {
        return;
    }
    for (i = 0; i < m->cap; i++) {
        free(m->slots[i].name);
    }
    free(m->slots);
    free(m);
}

static size_t
tm_hash(const uint8_t id[16])
{
    uint64_t h;

    memcpy(&h, id + 4, sizeof(h));
    h ^= h >> 29;
    h *= UINT64_C(0xbf58476d1ce4e5b9);
    h ^= h >> 32;
    return (size_t)h;
}

static struct kr_tm_entry *
tm_find(struct kr_tm_entry *slots, size_t cap, const uint8_t id[16])
{
    size_t i = tm_hash(id) & (cap - 1);

    for (;;) {
        if (slots[i].name == NULL || memcmp(slots[i].id, id, 16) == 0) {
            return &slots[i];
        }
        i = (i + 1) & (cap - 1);
    }
}

static bool
tm_grow(struct kr_topic_map *m)
{
    size_t ncap = m->cap * 2, i;
    struct kr_tm_entry *ns = calloc(ncap, sizeof(*ns));

    if (ns == NULL) {
        return false;
    }
    for (i = 0; i < m->cap; i++) {
        if (m->slots[i].name != NULL) {
            *tm_find(ns, ncap, m->slots[i].id) = m->slots[i];
        }
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return true;
}

bool
kr_topic_map_put(struct kr_topic_map *m, const uint8_t id[16],
                 const char *name, size_t len)
{
    struct kr_tm_entry *e;
    char *copy;

    if (m == NULL || id == NULL || name == NULL) {
        return false;
    }
    e = tm_find(m->slots, m->cap, id);
    if (e->name != NULL && strlen(e->name) == len &&
        memcmp(e->name, name, len) == 0) {
        return true;             /* known: the common case */
    }
    copy = malloc(len + 1);
    if (copy == NULL) {
        return false;
    }
    memcpy(copy, name, len);
    copy[len] = '\0';
    if (e->name != NULL) {
        free(e->name);
        e->name = copy;
        return true;
    }
    if (m->n >= KR_TOPIC_MAP_MAX ||
        ((m->n + 1) * 4 > m->cap * 3 && !tm_grow(m))) {
        free(copy);
        return false;
    }
    e = tm_find(m->slots, m->cap, id);
    memcpy(e->id, id, 16);
    e->name = copy;
    m->n++;
    return true;
}

const char *
kr_topic_map_name(const struct kr_topic_map *m, const uint8_t id[16])
{
    const struct kr_tm_entry *e;

    if (m == NULL || id == NULL) {
        return NULL;
    }
    e = tm_find(m->slots, m->cap, id);
    return e->name;
}

size_t
kr_topic_map_size(const struct kr_topic_map *m)
{
    return m != NULL ? m->n : 0;
}

void
kr_topics_metadata_each(const struct kr_msg *rsp,
                        void (*cb)(void *arg, const uint8_t id[16],
                                   const char *name, size_t len),
                        void *arg)
{
    static const uint8_t zero[16];
    const struct kr_val *topics;
    uint32_t i;

    if (rsp == NULL || rsp->body == NULL || rsp->dir != KR_DIR_RESPONSE ||
        rsp->api_key != KR_API_METADATA || rsp->api_version < 10) {
        return;
    }
    topics = kr_node_get_id(rsp->body, KR_FIELD_TOPICS);
    if (topics == NULL || topics->is_null || topics->u.arr == NULL) {
        return;
    }
    for (i = 0; i < topics->u.arr->n; i++) {
        const struct kr_node *t = topics->u.arr->items[i].u.node;
        const struct kr_val *id, *name;

        if (t == NULL) {
            continue;
        }
        id = kr_node_get_id(t, KR_FIELD_TOPIC_ID);
        name = kr_node_get_id(t, KR_FIELD_NAME);
        if (id == NULL || name == NULL || !str_ok(name) ||
            id->u.s.p == NULL || id->u.s.len != 16 ||
            memcmp(id->u.s.p, zero, 16) == 0) {
            continue;
        }
        cb(arg, id->u.s.p, (const char *)name->u.s.p,
           (size_t)name->u.s.len);
    }
}

static void
map_learn_cb(void *arg, const uint8_t id[16], const char *name, size_t len)
{
    (void)kr_topic_map_put(arg, id, name, len);
}

void
kr_topic_map_learn(struct kr_topic_map *m, const struct kr_msg *rsp)
{
    if (m != NULL) {
        kr_topics_metadata_each(rsp, map_learn_cb, m);
    }
}
