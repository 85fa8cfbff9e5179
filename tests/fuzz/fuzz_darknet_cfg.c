/* Darknet's cfg reader and network parser (read_cfg, parse_network_cfg) on
 * an in-memory cfg file, with the [selsync] section handler registered as
 * the adapter registers it. A cfg Darknet refuses (its error message, then
 * exit) is a clean outcome; a crash, an out-of-bounds access, undefined
 * behaviour or a leak in code outside Darknet is a failure. */
#include <stddef.h>
#include <stdint.h>

#include "darknet.h"
#include "fuzz_common.h"
#include "shim.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    set_cfg_section_handler("[selsync]", fuzz_selsync_section, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memfile_set(NULL, data, size);
    fuzz_selsync_reset();
    shim_begin(memfile_path());
    if (!setjmp(shim_refusal)) free_network(parse_network_cfg((char *)memfile_path()));
    shim_end();
    return 0;
}
