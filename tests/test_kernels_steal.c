/* test_kernels_steal.c — contiguous shares with stealing (kernels/steal.h).
 *
 * Every item is handed out exactly once, whatever the number of shares,
 * items, claim sizes and callers (including callers that own no share and
 * shares nobody owns); an owner alone walks its share front to back in
 * order; a stealer takes from the back; awkward sizes: 0 items, fewer items
 * than shares, explicit bounds with empty shares. Counts, never timing. */
#include "kernels/steal.h"
#include "t.h"

#include <omp.h>
#include <stdint.h>

/* Drain s with `callers` threads (tid = thread number + tid_off), claims of
 * up to max; count[i] += 1 per hand-out of item i. */
static void drain(k3_steal *s, int callers, int tid_off, int64_t max, int *count) {
#pragma omp parallel num_threads(callers)
    {
        int64_t i, got;
        while ((i = k3_steal_next(s, omp_get_thread_num() + tid_off, max, &got)) >= 0) {
            for (int64_t k = i; k < i + got; k++) {
#pragma omp atomic
                count[k]++;
            }
        }
    }
}

TEST(every_item_once) {
    static int count[5000];
    const int64_t sizes[] = {0, 1, 2, 3, 7, 16, 63, 64, 65, 1000, 4999};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int n = 1; n <= 9; n += 2)
            for (int64_t max = 1; max <= 17; max += 8)
                for (int callers = 1; callers <= 3; callers++)
                    for (int off = 0; off <= n; off += n) { /* off = n: nobody owns a share */
                        int64_t items = sizes[si];
                        k3_steal s;
                        memset(count, 0, sizeof count);
                        k3_steal_init(&s, n, items, NULL);
                        drain(&s, callers, off, max, count);
                        int bad = 0;
                        for (int64_t i = 0; i < items; i++) bad += count[i] != 1;
                        CHECK(bad == 0,
                              "items %lld, shares %d, max %lld, callers %d, off %d: %d bad",
                              (long long)items, n, (long long)max, callers, off, bad);
                    }
}

TEST(owner_alone_walks_front_to_back) {
    k3_steal s;
    k3_steal_init(&s, 3, 100, NULL); /* shares [0,33) [33,66) [66,100) */
    int64_t got, next = 33, i;
    while ((i = k3_steal_next(&s, 1, 4, &got)) >= 0 && i >= 33 && i < 66) {
        CHECK(i == next && got >= 1 && got <= 4, "item %lld (want %lld), got %lld", (long long)i,
              (long long)next, (long long)got);
        next = i + got;
    }
    CHECK(next == 66, "own share ended at %lld", (long long)next);
    /* then it steals from the back of the next share (2): items 99, 98, ... */
    CHECK(i == 96 && got == 4, "first steal at %lld (+%lld), want 96 (+4)", (long long)i,
          (long long)got);
    i = k3_steal_next(&s, 1, 4, &got);
    CHECK(i == 92 && got == 4);
    /* the owner of share 2 still has its front */
    i = k3_steal_next(&s, 2, 4, &got);
    CHECK(i == 66 && got == 4);
}

TEST(explicit_bounds_with_empty_shares) {
    static int count[40];
    const int64_t bound[5] = {0, 0, 17, 17, 40};
    for (int callers = 1; callers <= 4; callers++) {
        k3_steal s;
        memset(count, 0, sizeof count);
        k3_steal_init(&s, 4, 40, bound);
        drain(&s, callers, 0, 3, count);
        int bad = 0;
        for (int i = 0; i < 40; i++) bad += count[i] != 1;
        CHECK(bad == 0, "callers %d: %d bad", callers, bad);
    }
    k3_steal s;
    k3_steal_init(&s, 4, 40, bound);
    int64_t got, i = k3_steal_next(&s, 1, 100, &got); /* share 1 is [0,17) */
    CHECK(i == 0 && got == 17);
    i = k3_steal_next(&s, 0, 100, &got); /* share 0 empty: steals share 1's rest? none; then 3 */
    CHECK(i == 17 && got == 23, "got item %lld +%lld", (long long)i, (long long)got);
    CHECK(k3_steal_next(&s, 3, 1, &got) == -1);
}

int main(void) {
    RUN(every_item_once);
    RUN(owner_alone_walks_front_to_back);
    RUN(explicit_bounds_with_empty_shares);
    return t_done();
}
