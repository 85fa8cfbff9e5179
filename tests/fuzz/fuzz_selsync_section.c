/* The [selsync] section parser (plugin/core/config.c) fed as Darknet feeds
 * it: the input is the body of a [selsync] section, placed after a minimal
 * network in an in-memory cfg and read by Darknet's own parse_network_cfg,
 * which hands the section's key=value lines to the registered handler (the
 * adapter's calls, fuzz_common.c). An input with a line that opens another
 * section is skipped: Darknet's layers are fuzz_darknet_cfg's to explore. */
#include <stddef.h>
#include <stdint.h>

#include "darknet.h"
#include "fuzz_common.h"
#include "shim.h"

static const char network_prefix[] = "[net]\ninputs=1\n[softmax]\n[selsync]\n";

/* Whether a line of data starts with '[' after the blanks Darknet strips. */
static int opens_section(const uint8_t *data, size_t size)
{
    int line_start = 1;
    for (size_t i = 0; i < size; i++) {
        if (data[i] == '\n') {
            line_start = 1;
        } else if (line_start && data[i] != ' ' && data[i] != '\t') {
            if (data[i] == '[') return 1;
            line_start = 0;
        }
    }
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    set_cfg_section_handler("[selsync]", fuzz_selsync_section, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (opens_section(data, size)) return 0;
    memfile_set(network_prefix, data, size);
    fuzz_selsync_reset();
    shim_begin(memfile_path());
    if (!setjmp(shim_refusal)) free_network(parse_network_cfg((char *)memfile_path()));
    shim_end();
    return 0;
}
