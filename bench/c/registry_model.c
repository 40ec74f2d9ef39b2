/* What the registry's core would cost if it were coded ideally: a model in
 * C of the same design (src/registry/objects: 64 mutex-protected shards, an
 * open-addressing index of 4-byte tagged slots over a slab of 64-byte
 * records with a free list, backward-shift deletion), without the parts
 * measured separately (per-context lists, creation clock, graveyard) and
 * without growth, stale records or out-of-memory handling. It inserts and
 * takes one record N times; both are inlined into the loop, and the
 * address is hidden from the compiler each round so that nothing is hoisted
 * out of it. The instructions per pair (about 180 with gcc 12 -O2, the
 * loop's few included) are what the shim's registry core (229 measured)
 * could at best come down to: BENCHMARKS.md's PD-pair analysis.
 *
 *   gcc -O2 -o registry_model bench/c/registry_model.c
 *   for n in 1000 6000; do valgrind --tool=callgrind \
 *       --callgrind-out-file=/dev/null ./registry_model $n; done
 *   (difference of the "Collected" counts / 5000 = per pair, loop included)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct { uint64_t w[8]; } rec;
typedef struct __attribute__((aligned(128))) {
    int lock; uint32_t *slots; size_t mask; rec *slab; uint32_t free, used; size_t len;
} shard;
static shard S[64];
#define MUL 0x9E3779B97F4A7C15ull

static inline void lk(int *l) { int z = 0; if (!__atomic_compare_exchange_n(l, &z, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) abort(); }
static inline void ul(int *l) { if (__atomic_exchange_n(l, 0, __ATOMIC_RELEASE) == 2) abort(); }

static inline __attribute__((always_inline)) int insert(uint64_t addr, uint64_t ctx, uint64_t caller, uint64_t a, uint64_t meta)
{
    if (((addr | ctx) & (~((1ull << 47) - 1) | 7)) | (caller >> 47) || !addr) return 0;
    uint64_t h = addr * MUL;
    shard *s = &S[h >> 58];
    lk(&s->lock);
    uint32_t tag = (h >> 40) & 0xffff, i = tag & s->mask, v;
    while ((v = s->slots[i])) {
        if ((v >> 16) == tag && (s->slab[(v & 0xffff) - 1].w[0] & ((1ull << 44) - 1)) == addr >> 3) abort(); /* stale: not in this model */
        i = (i + 1) & s->mask;
    }
    uint32_t idx = s->free;
    if (idx == UINT32_MAX) abort();
    rec *r = &s->slab[idx];
    s->free = (uint32_t)r->w[3];
    r->w[0] = addr >> 3 | (ctx >> 3) << 44;
    r->w[1] = (ctx >> 23) << 44;
    r->w[2] = caller | (ctx >> 43) << 47;
    r->w[3] = a; r->w[4] = 0; r->w[5] = 0; r->w[6] = meta; r->w[7] = 0;
    s->slots[i] = tag << 16 | (idx + 1);
    s->len++;
    ul(&s->lock);
    return 1;
}

static inline __attribute__((always_inline)) int take(uint64_t addr, rec *out)
{
    if ((addr >> 3 | addr << 61) - 1 >= (1ull << 44) - 1) return 0;
    uint64_t h = addr * MUL;
    shard *s = &S[h >> 58];
    lk(&s->lock);
    uint32_t tag = (h >> 40) & 0xffff, i = tag & s->mask, v;
    for (;;) {
        v = s->slots[i];
        if (!v) { ul(&s->lock); return 0; }
        if ((v >> 16) == tag && (s->slab[(v & 0xffff) - 1].w[0] & ((1ull << 44) - 1)) == addr >> 3) break;
        i = (i + 1) & s->mask;
    }
    uint32_t idx = (v & 0xffff) - 1;
    *out = s->slab[idx];
    int ok = !(out->w[6] >> 63) && ((1u << ((out->w[6] >> 47) & 31)) & 0x2);
    if (ok) {
        s->slab[idx].w[3] = s->free; s->free = idx;
        size_t hole = i, j = i;
        for (;;) {
            j = (j + 1) & s->mask;
            uint32_t t = s->slots[j];
            if (!t) break;
            size_t home = (t >> 16) & s->mask;
            if (((j - home) & s->mask) >= ((j - hole) & s->mask)) { s->slots[hole] = t; hole = j; }
        }
        s->slots[hole] = 0;
        s->len--;
    }
    ul(&s->lock);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    long n = strtol(argv[1], 0, 0);
    for (int k = 0; k < 64; k++) {
        S[k].mask = 1023; S[k].slots = calloc(1024, 4); S[k].slab = calloc(1024, 64);
        for (uint32_t q = 0; q < 1024; q++) S[k].slab[q].w[3] = q + 1 < 1024 ? q + 1 : UINT32_MAX;
        S[k].free = 0;
    }
    void *p = malloc(64);
    rec r;
    for (long i = 0; i < n; i++) {
        uint64_t a1 = (uint64_t)p, a2 = (uint64_t)p, c = 0x5555000, k = 0x401234;
        __asm__ volatile("" : "+r"(a1), "+r"(a2), "+r"(c), "+r"(k));
        if (!insert(a1, c, k, 7, (uint64_t)1 << 47 | 1234))
            abort();
        if (!take(a2, &r)) abort();
        __asm__ volatile("" : : "m"(r));
    }
    printf("ok\n");
    return 0;
}
