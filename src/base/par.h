/* par.h — whether an OpenMP parallel region is worth opening here.
 *
 * A region whose if() clause is false, or that runs on one thread, is not
 * free in libgomp: it still starts a team of one and ends it at a barrier
 * whose last arriver wakes the team with a futex system call. At --threads 1
 * that was ~86 system calls per decoded token on the bench preset. So the
 * model's per-token regions test k3_par_worth() and, when it is false, run
 * their loop on the calling thread without any region. A worksharing loop
 * (`omp for`) met outside a region runs all its iterations on the calling
 * thread, so a body written for the region can be called directly. */
#ifndef K3_BASE_PAR_H
#define K3_BASE_PAR_H

#include <omp.h>

/* enough: the caller's own size test. True when a region here would run
 * more than one thread. */
static inline int k3_par_worth(int enough) {
    return enough && omp_get_max_threads() > 1 && !omp_in_parallel();
}

/* For a region whose body holds orphaned worksharing (`omp for`, `omp
 * barrier`): true when the body may be called directly, i.e. outside any
 * region and where the region would have had one thread. Inside a caller's
 * region the body's constructs would bind to that caller's team, so there
 * the function still opens its own (inactive) region, a team of one. */
static inline int k3_par_direct(int enough) {
    return !omp_in_parallel() && !k3_par_worth(enough);
}

#endif
