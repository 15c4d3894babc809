// Counts heap allocations in the att-bench process: malloc, calloc, realloc, posix_memalign,
// aligned_alloc and memalign are defined here, counted, and forwarded to glibc's own implementations.
// Linked only into att-bench (never into the library, the tests or the fuzz target).
#ifndef CALLOCCOUNTER_H
#define CALLOCCOUNTER_H

/// The number of allocation calls made by this process so far (all threads).
unsigned long long cac_allocation_count(void);

#endif
