# Read by CTest (TEST_INCLUDE_FILES of tests/) in the sanitizer build
# (-DSELSYNC_SANITIZE=ON): every test, and every rank mpirun starts, runs
# with these sanitizer runtime options.
#  - leaks: lsan.supp silences Open MPI's allocations and nothing else. The
#    unwinder walks the whole stack of every allocation, also through
#    libraries built without frame pointers (fast_unwind_on_malloc=0), so
#    that an entry such as ompi_mpi_init is seen under Open MPI's
#    allocations, which are often made in its components (plugins unloaded
#    by MPI_Finalize, nameless when the leaks are reported);
#  - a failed allocation returns NULL, as glibc's does
#    (allocator_may_return_null), so the code that reports it runs as it
#    does built normally;
#  - the first error of any sanitizer ends the process (exit status 1) with
#    a stack trace.
set(ENV{ASAN_OPTIONS} "fast_unwind_on_malloc=0:allocator_may_return_null=1:detect_leaks=1:halt_on_error=1")
set(ENV{LSAN_OPTIONS} "suppressions=${CMAKE_CURRENT_LIST_DIR}/lsan.supp:print_suppressions=0")
set(ENV{UBSAN_OPTIONS} "print_stacktrace=1:halt_on_error=1")
# ThreadSanitizer (-DSELSYNC_TSAN=ON): tsan.supp silences races inside Open
# MPI's own threads and nothing else; the first report ends the process.
set(ENV{TSAN_OPTIONS} "suppressions=${CMAKE_CURRENT_LIST_DIR}/tsan.supp:halt_on_error=1:second_deadlock_stack=1")
