/* The [selsync] section parser (plugin/core/config.c) fed as Darknet feeds
 * it: the input is the body of a [selsync] section, placed after a minimal
 * network in an in-memory cfg and read by Darknet's own parse_network_cfg,
 * which hands the section's key=value lines to the registered handler (the
 * adapter's calls, fuzz_common.c). Lines that open another section are
 * parsed as Darknet would parse them. */
#include <stddef.h>
#include <stdint.h>

#include "darknet.h"
#include "fuzz_common.h"
#include "shim.h"

static const char network_prefix[] = "[net]\ninputs=1\n[softmax]\n[selsync]\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    set_cfg_section_handler("[selsync]", fuzz_selsync_section, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    memfile_set(network_prefix, data, size);
    fuzz_selsync_reset();
    shim_begin(memfile_path());
    if (!setjmp(shim_refusal)) free_network(parse_network_cfg((char *)memfile_path()));
    shim_end();
    return 0;
}
