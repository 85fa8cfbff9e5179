# Read by CTest (TEST_INCLUDE_FILES of tests/) in the sanitizer build
# (-DSELSYNC_SANITIZE=ON): every test, and every rank mpirun starts, runs
# with these sanitizer runtime options.
#  - leaks: lsan.supp silences Open MPI's allocations and nothing else; the
#    unwinder walks through libraries built without frame pointers
#    (fast_unwind_on_malloc=0) so that the suppressions see MPI_Init and
#    friends under an allocation, and Open MPI keeps its components loaded
#    at MPI_Finalize (mca_base_component_disable_dlclose) so that their
#    frames keep their names;
#  - a failed allocation returns NULL, as glibc's does
#    (allocator_may_return_null), so the code that reports it runs as built
#    normally;
#  - the first error of any sanitizer ends the process with a stack trace.
set(ENV{ASAN_OPTIONS} "fast_unwind_on_malloc=0:allocator_may_return_null=1:detect_leaks=1:halt_on_error=1")
set(ENV{LSAN_OPTIONS} "suppressions=${CMAKE_CURRENT_LIST_DIR}/lsan.supp:print_suppressions=0")
set(ENV{UBSAN_OPTIONS} "print_stacktrace=1:halt_on_error=1")
set(ENV{OMPI_MCA_mca_base_component_disable_dlclose} "1")
